"""fp32 GEMMs of a short K as row sweeps (tools/builtin/triton_gemm_sweep.py), on the CPU: which
GEMMs sweep, the configs tuning may write, and sweeps verified by the real harness under the
Triton interpreter, as a GPU run writes them."""

from __future__ import annotations

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.builtin.triton_gemm_sweep import SHORT_K, fits
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate


def _gemm_config(tmp_path, forward: str, inputs: str, precision: str = "fp32"):
    task = task_file(tmp_path, forward, inputs)
    gen = builtin_generator(task, "triton", tmp_path, device="cuda", precision=precision)
    [(name, config)] = [(n, c) for n, c in gen.default_config().items() if "BLOCK_M" in c]
    return task, gen, name, config


@pytest.mark.parametrize(
    ("inputs", "sweeps"),
    [
        ("torch.randn(32768, 64), torch.randn(64, 32768)", True),  # level1/7's shapes
        ("torch.randn(32768, 32), torch.randn(32, 32768)", True),  # level1/9's
        ("torch.randn(300, 20), torch.randn(20, 500)", True),
        (f"torch.randn(4096, {SHORT_K + 1}), torch.randn({SHORT_K + 1}, 4096)", False),
        ("torch.randn(4096, 32), torch.randn(32, 1)", False),  # a GEMV streams instead
    ],
)
def test_short_k_gemms_sweep_rows(tmp_path, inputs, sweeps):
    _, gen, _, config = _gemm_config(tmp_path, "x @ y", inputs)
    assert ("SWEEP_N" in config) == sweeps
    assert gen.fits(gen.default_config())


def test_a_sweep_fills_the_gpu_and_walks_the_rest():
    """level1/7's default: 256 row blocks x 8 column spans of 4096 = 2048 programs, each
    sweeping 64 tiles, all whole tiles of its span."""
    from kernelgraph.tools.builtin.kernels import GemmKernel, Operand
    from kernelgraph.tools.builtin.triton_gemm_sweep import default, grid

    kernel = GemmKernel(
        "k0_mm", 1, 32768, 32768, 64, Operand("in0", (0, 64, 1)), Operand("in1", (0, 1, 64)),
        ["in0", "in1"], ["out0"],
    )  # fmt: skip
    config = default(kernel)
    assert config["SWEEP_N"] == 4096 and config["BLOCK_K"] == 64
    assert grid(kernel, config) == "(triton.cdiv(32768, 128) * triton.cdiv(32768, 4096), 1, 1)"
    assert fits(kernel, config)
    assert not fits(kernel, {**config, "SWEEP_N": 4096 + 64, "BLOCK_N": 128})  # a split tile
    assert not fits(kernel, {**config, "BLOCK_N": 128, "num_stages": 4})  # 288 KB of shared


def test_other_precisions_do_not_sweep(tmp_path):
    for precision in ("tf32", "fp16"):
        _, _, _, config = _gemm_config(
            tmp_path, "x @ y", "torch.randn(4096, 32), torch.randn(32, 4096)", precision
        )
        assert "SWEEP_N" not in config


@pytest.mark.parametrize(
    ("forward", "inputs"),
    [
        # rows and columns that end mid-tile, a K padded to 64, an epilogue reading a column
        ("torch.relu(x @ y) + y[0]", "torch.randn(200, 40), torch.randn(40, 300)"),
        ("torch.bmm(x, y.transpose(1, 2))", "torch.randn(3, 70, 24), torch.randn(3, 90, 24)"),
    ],
)
def test_sweeps_verify_under_the_harness_at_fp32(tmp_path, forward, inputs):
    """Several tiles a sweep, the last one partial: every output element written once with
    all three TF32 products. With the low parts' products dropped, the same file fails fp32's
    tolerance, so passing needs them."""
    task, gen, name, config = _gemm_config(tmp_path, forward, inputs)
    config = {**config, "BLOCK_M": 64, "BLOCK_N": 64, "SWEEP_N": 128}
    source = gen.code({**gen.default_config(), name: config})
    assert source.count('input_precision="tf32")') == 3 and "for n0 in range(" in source
    judge = EvalConfig(dsl="triton", device="cpu", seeds=2, profile=False)
    cache = EvalCache(tmp_path / "cache")
    kernel = tmp_path / "kernel.py"
    kernel.write_text(source)
    verdict = evaluate(task, kernel, judge, cache=cache, use_cache=False)
    assert verdict.passed, verdict.message
    high_only = source.replace("acc = tl.dot(a_lo, b_hi", "acc = 0.0 * tl.dot(a_lo, b_hi")
    high_only = high_only.replace("_tf32_lo(b, b_hi)", "0.0 * b_hi")
    kernel.write_text(high_only)
    verdict = evaluate(task, kernel, judge, cache=cache, use_cache=False)
    assert not verdict.passed and verdict.status == "incorrect", verdict.message
