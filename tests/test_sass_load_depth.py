"""benchmarks/sass_load_depth.py on the builtin's own kernel files, compiled for sm_90a on this
machine (no GPU): the middle-axis tile the builtin starts a mean at keeps enough loads in flight,
where the tile an argmin starts at gets one load at a time for a mean (5.37 ms against 2.08 on
the H200, benchmarks/RESULTS.md). ptxas's choice depends on the constants baked in, so the test
uses level1/48's sizes: at [8, 600, 300] the same 128 x 64 tile kept 15360 loads in flight."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from builtin_helpers import builtin_generator, task_file

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "sass_load_depth.py"


def _depth(tmp_path: Path, forward: str, tile: dict | None = None) -> dict:
    return _figures(tmp_path, forward, "torch.randn(128, 4096, 4095)", tile=tile)  # level1/48's


def _figures(
    tmp_path: Path, forward: str, inputs: str, params: str = "", tile: dict | None = None
) -> dict:
    task = task_file(tmp_path, forward, inputs, params=params)
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    config = generator.default_config()
    for params in config.values():
        params.update(tile or {})
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator.code(config))
    done = subprocess.run([sys.executable, str(SCRIPT), str(kernel)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    if "ptxas" in done.stderr and done.returncode:
        pytest.skip(f"no ptxas for sm_90a here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("k0_"))
    return eval(line[line.index("} {") + 2 :])  # the script's own printed dict


def test_the_default_mean_tile_keeps_loads_in_flight_and_the_argmin_tile_would_not(tmp_path):
    mean = _depth(tmp_path, "torch.mean(x, dim=1)")
    slow = _depth(tmp_path, "torch.mean(x, dim=1)", {"BLOCK_K": 128, "BLOCK_R": 64, "num_warps": 8})
    assert mean["loads_in_flight_per_sm"] >= 4 * slow["loads_in_flight_per_sm"]
    assert slow["ldg_run"] == 1 and mean["ldg_run"] > 1


def test_a_kernel_with_a_scalar_argument_is_skipped_with_the_reason(tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text("""import triton
import triton.language as tl


@triton.jit
def scale(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


def run(x):
    scale[(1,)](x, x.numel(), BLOCK=128, num_warps=4)
""")
    done = subprocess.run([sys.executable, str(SCRIPT), str(kernel)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "scale {'BLOCK': 128, 'num_warps': 4} {'skipped': 'CompilationError" in done.stdout


def test_a_1x1_convolution_copies_its_input_16_bytes_at_a_time(tmp_path):
    """Flattened into the (kernel position, channel block) loop, a 1x1 convolution's input rows
    lost their alignment: 4-byte copies, 5.87 ms against 4.59 for the nested loop on level1/87
    (H100). Its position's lines are hoisted out of the channel loop now."""
    figures = _figures(tmp_path, "self.c(x)", "torch.randn(2, 64, 32, 32)",
                       params="self.c = nn.Conv2d(64, 128, 1, bias=False)")  # fmt: skip
    assert figures["async_copies_16B"] > 0 and figures["async_copies_narrow"] == 0


def test_a_resident_softmax_keeps_seven_programs_an_sm(tmp_path):
    """Resident rows launch through `_launch_resident`; at KernelBench's softmax rows the
    exchange's wait in one loop holds 72 registers, 7 programs of 4 warps an SM (a loop each
    partial held 78, 6 programs: benchmarks/RESULTS.md)."""
    figures = _figures(tmp_path, "torch.softmax(x, dim=1)", "torch.randn(4096, 393216)")
    assert figures["spill_store_bytes"] == 0
    assert figures["programs_per_sm"] >= 7, figures


def test_misaligned_resident_rows_load_vectors_and_keep_seven_programs_an_sm(tmp_path):
    """level1/38's rows of 65535 loaded element by element held 128 registers, 4 programs an SM;
    chunks started at an aligned element load 16 bytes at a time (8 vector loads for 32
    elements a thread) and keep 7 (benchmarks/RESULTS.md)."""
    figures = _figures(tmp_path, "x / torch.mean(torch.abs(x), dim=1, keepdim=True)",
                       "torch.randn(32768, 65535)")  # fmt: skip
    assert figures["spill_store_bytes"] == 0
    assert figures["ldg_run"] == 8 and figures["programs_per_sm"] >= 7, figures
