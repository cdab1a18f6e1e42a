"""Forward depthwise convolutions as row sweeps (tools/builtin/triton_conv_depthwise.py),
verified by the real harness on the Triton interpreter: rows that roll (stride 1) and rows that
read their whole window (strided, dilated), 1d/2d/3d, padding, a fused epilogue, and chunks
and column tiles that end mid-plane."""

from __future__ import annotations

import re

import pytest
from builtin_helpers import task_file
from test_builtin import generate, verify

SWEEPS = {
    "2d_3x7_relu": ("torch.relu(self.c(x))", "torch.randn(2, 3, 9, 13)",
                    "self.c = nn.Conv2d(3, 3, (3, 7), groups=3, bias=False)"),
    "2d_padded_bias_sigmoid": ("torch.sigmoid(self.c(x))", "torch.randn(1, 3, 10, 11)",
                               "self.c = nn.Conv2d(3, 3, 3, padding=1, groups=3)"),
    "2d_one_row_window": ("self.c(x) * 2", "torch.randn(2, 2, 7, 6)",
                          "self.c = nn.Conv2d(2, 2, (1, 3), stride=(1, 2), padding=(0, 1), groups=2)"),
    "2d_one_column_window": ("self.c(x)", "torch.randn(2, 4, 8, 5)",
                             "self.c = nn.Conv2d(4, 4, (3, 1), groups=4, bias=False)"),
    "2d_strided_rows": ("self.c(x)", "torch.randn(2, 4, 11, 9)",
                        "self.c = nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4)"),
    "2d_dilated_rows": ("self.c(x) - 1", "torch.randn(1, 2, 12, 10)",
                        "self.c = nn.Conv2d(2, 2, (3, 2), dilation=(2, 3), padding=(2, 1), groups=2)"),
    "1d_strided_dilated": ("self.c(x)", "torch.randn(2, 3, 23)",
                           "self.c = nn.Conv1d(3, 3, 5, stride=2, padding=2, dilation=2, groups=3)"),
    "3d_padded_depth_strided": ("self.c(x)", "torch.randn(1, 2, 5, 6, 7)",
                                "self.c = nn.Conv3d(2, 2, (2, 3, 3), stride=(2, 1, 1), padding=(1, 1, 0), groups=2)"),
    # rows 16-byte aligned, stride 1 along them: lanes of four outputs, aligned vector groups
    "2d_3x7_groups": ("torch.relu(self.c(x))", "torch.randn(2, 3, 9, 16)",
                      "self.c = nn.Conv2d(3, 3, (3, 7), groups=3, bias=False)"),
    "2d_padded_dilated_columns_groups": (
        "self.c(x) + 1", "torch.randn(1, 2, 7, 12)",
        "self.c = nn.Conv2d(2, 2, 3, padding=(1, 3), dilation=(1, 3), groups=2)"),
    "2d_strided_rows_groups": ("self.c(x)", "torch.randn(2, 4, 11, 8)",
                               "self.c = nn.Conv2d(4, 4, 3, stride=(2, 1), padding=1, groups=4)"),
    "1d_padded_dilated_groups": ("self.c(x)", "torch.randn(2, 3, 24)",
                                 "self.c = nn.Conv1d(3, 3, 5, padding=2, dilation=2, groups=3)"),
    "3d_padded_groups": ("torch.tanh(self.c(x))", "torch.randn(1, 2, 5, 6, 8)",
                         "self.c = nn.Conv3d(2, 2, (2, 3, 3), padding=1, groups=2)"),
}  # fmt: skip


def _small_tiles(generator):
    """Chunks of 3 rows and tiles of 4 columns: most planes end mid-chunk and mid-tile."""
    defaults = generator.default_config()
    return {name: {**c, "ROWS": 3, "BLOCK_W": 4} if "ROWS" in c else c
            for name, c in defaults.items()}  # fmt: skip


@pytest.mark.parametrize("tiles", ["default", "small"])
@pytest.mark.parametrize("name", list(SWEEPS))
def test_depthwise_sweeps_verify(tmp_path, name, tiles):
    forward, inputs, params = SWEEPS[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, tmp_path, config=_small_tiles if tiles == "small" else None)
    source = kernel.read_text()
    assert "torch.convolution" not in source and "tl.dot" not in source
    assert "for j in range(ROWS" in source or name.startswith("1d")
    assert ("tl.split(" in source) == name.endswith("_groups")  # vector groups, or a load a tap
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    ("params", "width", "loads"),
    [("nn.Conv2d(3, 3, (3, 7), groups=3)", 9, 7),  # rolling: one load per kernel column
     ("nn.Conv2d(3, 3, (3, 7), stride=(2, 1), groups=3)", 9, 21),  # strided rows: the window
     ("nn.Conv3d(3, 3, (2, 3, 3), groups=3)", 9, 6),  # rolling: depth x columns
     ("nn.Conv2d(3, 3, (3, 7), groups=3)", 16, 3)],  # aligned rows: 3 groups of four
    ids=["rolling", "strided_rows", "3d_rolling", "rolling_groups"],
)  # fmt: skip
def test_a_rolling_sweep_loads_each_input_row_once(tmp_path, params, width, loads):
    """A row's loads, per outer tap: one a kernel column, or (aligned rows) one a group of four
    inputs that a lane's four outputs touch."""
    shape = f"1, 3, 4, 8, {width}" if "3d" in params else f"1, 3, 8, {width}"
    task = task_file(tmp_path, "self.c(x)", f"torch.randn({shape})", params=f"self.c = {params}")
    source = generate(task, tmp_path).read_text()
    loop = source[source.index("for j in range(ROWS") :]
    assert len(re.findall(r"\bv\w* = tl\.load\(", loop)) == loads


def test_a_sweep_that_drops_a_carried_partial_sum_fails(tmp_path):
    """Each output row sums its kernel rows over three input rows; a file whose carried sum
    forgets the row before is wrong, and the harness says so."""
    forward, inputs, params = SWEEPS["2d_padded_bias_sigmoid"]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, tmp_path)
    source = kernel.read_text()
    forgetful, count = re.subn(r"p1 = tl\.fma\((\w+), (\w+), p0\)", r"p1 = \1 * \2", source)
    assert count == 1
    kernel.write_text(forgetful)
    verdict = verify(task, kernel, tmp_path)
    assert not verdict.passed and verdict.status == "incorrect", verdict.message


def test_a_transposed_depthwise_convolution_keeps_the_flat_kernel(tmp_path):
    task = task_file(tmp_path, "self.t(x)", "torch.randn(1, 2, 5, 4)",
                     params="self.t = nn.ConvTranspose2d(2, 2, 3, stride=2, groups=2)")  # fmt: skip
    kernel = generate(task, tmp_path)
    source = kernel.read_text()
    assert "ROWS" not in source and "BLOCK: tl.constexpr" in source
    assert verify(task, kernel, tmp_path).passed


@pytest.mark.parametrize("name", ["2d_3x7_groups", "2d_strided_rows"])
def test_a_sweep_past_int32_offsets_computes_them_in_int64(tmp_path, monkeypatch, name):
    """Offsets past int32 (KernelBench's 4 GiB inputs come close) start from an int64 plane."""
    monkeypatch.setattr("kernelgraph.tools.builtin.conv.INT32_LIMIT", 100)
    forward, inputs, params = SWEEPS[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, tmp_path, config=_small_tiles)
    assert "ROWS)).to(tl.int64)" in kernel.read_text()
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message
