"""A convolution's epilogue reads its operands from the tile's own coordinates
(tools/builtin/tile_offsets.py): a bias once per column, with the column mask, instead of an
integer division and a load per element."""

from __future__ import annotations

import pytest
from builtin_helpers import task_file
from test_builtin import generate, verify

from kernelgraph.tools.builtin.expr import Expr, const, var
from kernelgraph.tools.builtin.tile_offsets import Digit, TileOffsets

IDX = var("idx")


def _div(a: Expr, b: int) -> Expr:
    return Expr("idiv", (a, const(b)))


def _mod(a: Expr, b: int) -> Expr:
    return Expr("imod", (a, const(b)))


def _mul(a: Expr, b: int) -> Expr:
    return Expr("imul", (a, const(b)))


def _add(a: Expr, b: Expr) -> Expr:
    return Expr("iadd", (a, b))


def _conv(batch: int = 4, channels: int = 16, positions: int = 100) -> TileOffsets:
    digits = (
        Digit("nb[:, None]", batch, "row"),
        Digit("co[None, :]", channels, "col"),
        Digit("pos[:, None]", positions, "row"),
    )
    return TileOffsets(digits, row_mask="m_ok[:, None]", col_mask="n_ok[None, :]")


@pytest.mark.parametrize(
    ("offset", "spelled"),
    [
        (_mod(_div(IDX, 100), 16), ("co[None, :]", "n_ok[None, :]")),  # a channel's bias
        (_mod(IDX, 1600), ("co[None, :] * 100 + pos[:, None]", "mask")),  # [C, H, W]
        (_add(_mul(_div(IDX, 1600), 100), _mod(IDX, 100)),  # [N, 1, H, W]
         ("nb[:, None] * 100 + pos[:, None]", "m_ok[:, None]")),
        (_div(IDX, 100), ("nb[:, None] * 16 + co[None, :]", "mask")),  # [N, C, 1, 1]
        (_add(_mod(_div(IDX, 100), 16), const(3)), ("co[None, :] + 3", "n_ok[None, :]")),
        (_div(IDX, 6400), ("0", "mask")),  # past every digit: zero
        (IDX, ("nb[:, None] * 1600 + co[None, :] * 100 + pos[:, None]", "mask")),
    ],
    ids=["bias", "chw", "n_hw", "nc", "shifted", "zero", "idx"],
)  # fmt: skip
def test_offsets_of_idx_become_the_tiles_coordinates(offset, spelled):
    assert _conv().spell(offset) == spelled


@pytest.mark.parametrize(
    "offset",
    [
        _mod(IDX, 7),  # no run of digits is 7 long
        _div(_mul(IDX, 2), 100),  # only idx itself or its runs are divided
        _mod(_add(IDX, const(1)), 100),
        Expr("imul", (IDX, IDX)),
        var("other"),
    ],
    ids=["mod_7", "scaled_then_divided", "shifted_then_wrapped", "square", "other_var"],
)
def test_offsets_that_are_not_runs_of_digits_are_left_to_idx(offset):
    assert _conv().spell(offset) is None


def test_a_digit_of_radix_one_is_dropped():
    assert _conv(batch=1).spell(_div(IDX, 100)) == ("co[None, :]", "n_ok[None, :]")


def test_offsets_past_int32_keep_idx_arithmetic():
    huge = _conv(batch=64, channels=1024, positions=1 << 16)  # 2^32 elements
    assert huge.spell(_mod(_div(IDX, 1 << 16), 1024)) == ("co[None, :]", "n_ok[None, :]")
    assert huge.spell(IDX) is None


CONV = ("torch.relu(self.c(x)) + self.bias + self.plane", "torch.randn(2, 6, 7, 5)",
        "self.c = nn.Conv2d(6, 20, 3, padding=1, groups=2); "
        "self.bias = nn.Parameter(torch.randn(20, 1, 1)); "
        "self.plane = nn.Parameter(torch.randn(20, 7, 5))")  # fmt: skip


def test_a_convolutions_epilogue_reads_biases_per_column_and_verifies(tmp_path, tensor_cores):
    task = task_file(tmp_path, *CONV[:2], params=CONV[2])
    kernel = generate(task, tmp_path, config=lambda g: _each(g.default_config(), {"BLOCK_N": 8}))
    source = kernel.read_text()  # 10 output channels a group: a partial column tile
    assert source.count("mask=n_ok[None, :]") == 2  # the layer's bias and the parameter
    assert "co[None, :] * 35 + pos[:, None]" in source  # the plane: channel and position
    assert "//" not in source.split("idx = ")[1]  # no per-element division in the epilogue
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


def _each(config: dict, values: dict) -> dict:
    return {name: {**params, **values} for name, params in config.items()}
