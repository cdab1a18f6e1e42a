"""Rows strided in memory (reductions over a middle axis, as KernelBench's dim-1 reductions and
RMS norm), read whole or in a loop, in blocks of rows that cross an outer index: generated and
verified by the real harness under the Triton interpreter."""

from __future__ import annotations

import pytest
from builtin_helpers import builtin_generator, task_file, verify_forward

X = "torch.randn(3, 37, 45)"  # outer 3, rows of 37, inner 45: a block of 16 leaves 13 at the end
CASES = {
    "mean": "torch.mean(x, dim=1)",
    "argmin": "torch.argmin(x, dim=1)",
    "amax_keepdim_and_use": "x - torch.amax(x, dim=1, keepdim=True)",
    "softmax": "torch.softmax(x * 2, dim=1)",
    "variance": "torch.var(x, dim=1)",
    "rms_norm": "x / torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + 1e-5)",
}
BLOCKS = {  # BLOCK_K (16 rows: blocks cross an outer index), BLOCK_R (16 < 37: a loop)
    "looped": (16, 16),
    "whole_row": (16, 64),
}


def _blocks(block_k: int, block_r: int):
    def tweak(config: dict) -> None:
        for params in config.values():
            if "BLOCK_K" in params:
                params["BLOCK_K"] = block_k
                params["BLOCK_R"] = min(params["BLOCK_R"], block_r)

    return tweak


@pytest.mark.parametrize("blocks", list(BLOCKS))
@pytest.mark.parametrize("name", list(CASES))
def test_strided_rows_verify(tmp_path, name, blocks):
    verify_forward(tmp_path, "triton", CASES[name], X, tweak=_blocks(*BLOCKS[blocks]))


def test_looped_strided_rows_written_backwards_verify(tmp_path):
    code = verify_forward(
        tmp_path, "triton", "x / torch.sum(x.abs(), dim=1, keepdim=True)", X, tweak=_blocks(16, 16)
    )
    assert "for back in range" in code


@pytest.mark.parametrize(("name", "tile"), [("mean", (64, 64, 4)), ("argmin", (128, 64, 8))])
def test_a_gpu_run_starts_strided_rows_at_the_tile_measured_fastest_for_its_reduction(
    tmp_path, name, tile
):
    """On the H200 a dim-1 mean ran 2.5x slower in the argmin's best tile than in its own
    (benchmarks/RESULTS.md): the default follows whether positions are carried. 25600 columns:
    64-wide tiles already give every SM more than two programs."""
    task = task_file(tmp_path, CASES[name], "torch.randn(128, 300, 200)")
    config = builtin_generator(task, "triton", tmp_path, device="cuda").default_config()
    (params,) = config.values()
    assert (params["BLOCK_K"], params["BLOCK_R"], params["num_warps"]) == tile


@pytest.mark.parametrize(
    ("shape", "tile"),
    [
        ("torch.randn(4, 300, 200)", (16, 256, 8)),  # 800 columns: 13 tiles of 64
        ("torch.randn(64, 300, 200)", (32, 128, 8)),  # 12800: 200 tiles of 64, 400 of 32
        ("torch.randn(128, 300, 200)", (64, 64, 4)),  # 25600: 400 tiles of 64 fill the GPU
        (
            "torch.randn(1, 8192, 8192)",
            (16, 256, 8),
        ),  # a linear layer's weight reduced over its rows
    ],
)
def test_few_strided_columns_take_narrower_deeper_tiles_on_a_gpu(tmp_path, shape, tile):
    """A 64-wide tile over few columns left fewer programs than SMs, each looping over
    megabytes; narrower tiles of the same size (down to 16 columns) give every SM several."""
    task = task_file(tmp_path, "torch.sum(x, dim=1)", shape)
    config = builtin_generator(task, "triton", tmp_path, device="cuda").default_config()
    (params,) = config.values()
    assert (params["BLOCK_K"], params["BLOCK_R"], params["num_warps"]) == tile
