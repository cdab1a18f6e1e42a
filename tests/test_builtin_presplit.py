"""GEMMs whose operands the launch splits into TF32 parts once (tf32x3_presplit), on the CPU:
which GEMMs start with it, the split kernel's parts, and a split GEMM verified by the real
harness under the Triton interpreter."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.builtin.tf32_copies import HELPERS
from kernelgraph.tools.builtin.triton_gemm import PRESPLIT
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate

BIG = "torch.randn(4096, 128), torch.randn(128, 4096)"  # 1024 tiles of 128 x 128


def _gemm_dots(tmp_path, forward: str, inputs: str, device: str = "cuda", precision="fp32"):
    task = task_file(tmp_path, forward, inputs)
    gen = builtin_generator(task, "triton", tmp_path, device=device, precision=precision)
    default, spaces = gen.default_config(), gen.tunables()
    gemm = next(name for name, config in default.items() if "BLOCK_M" in config)
    return default[gemm].get("DOT"), spaces.get(gemm, {}).get("DOT")


@pytest.mark.parametrize(
    ("forward", "inputs", "device", "dots"),
    [
        ("x @ y", BIG, "cuda", [PRESPLIT, "tf32x3", "ieee"]),
        ("torch.relu(x @ y) * 2", BIG, "cuda", [PRESPLIT, "tf32x3", "ieee"]),
        # fewer tiles than FEW_TILES: tf32x3 in 64-deep blocks first
        (
            "x @ y",
            "torch.randn(2048, 128), torch.randn(128, 2048)",
            "cuda",
            ["tf32x3", PRESPLIT, "ieee"],
        ),
        # each element of y is reused by 256 rows only: splitting it costs more than it saves
        ("x @ y", "torch.randn(256, 128), torch.randn(128, 4096)", "cuda", ["tf32x3", "ieee"]),
        # the epilogue reads x itself, which the split copy replaces
        ("x @ x + x", "torch.randn(4096, 4096)", "cuda", ["tf32x3", "ieee"]),
        ("x @ y", BIG, "cpu", None),  # the interpreter: nothing to tune, no copies to pay
    ],
)
def test_gemms_split_their_operands_ahead_where_both_are_reused_enough(
    tmp_path, forward, inputs, device, dots
):
    default, space = _gemm_dots(tmp_path, forward, inputs, device)
    assert space == dots
    assert default == (dots[0] if dots else "tf32x3")


def test_few_tiles_start_at_tf32x3_in_64_deep_blocks(tmp_path):
    """Below FEW_TILES tiles, tf32x3 in 64-deep blocks beat the split (level2/29 on the H100:
    1.47 ms against 1.62); a split in 64-deep blocks would not fit shared memory. (A K of one or
    two steps sweeps rows instead: tests/test_builtin_gemm_sweep.py.)"""
    shapes = {
        "torch.randn(2048, 128), torch.randn(128, 2048)": ("tf32x3", 128, 64),
        "torch.randn(4096, 128), torch.randn(128, 4096)": (PRESPLIT, 128, 32),
    }
    for inputs, (dot, block_m, block_k) in shapes.items():
        task = task_file(tmp_path, "x @ y", inputs)
        gen = builtin_generator(task, "triton", tmp_path, device="cuda", precision="fp32")
        [config] = [c for c in gen.default_config().values() if "BLOCK_M" in c]
        assert (config["DOT"], config["BLOCK_M"], config["BLOCK_K"]) == (dot, block_m, block_k)
        assert gen.fits(gen.default_config())


def test_other_precisions_have_no_split(tmp_path):
    assert _gemm_dots(tmp_path, "x @ y", BIG, precision="tf32") == (None, None)


def test_the_split_parts_are_exact_tf32_values_that_sum_to_the_input():
    """The split kernel on the Triton interpreter: high parts truncated (the largest float stays
    finite), low parts the rounded rest, both with TF32's 10-bit mantissa, and high + low within
    2^-21 of the input, relative (one TF32 part alone is off by up to 2^-10)."""
    script = f"""
import torch, triton, triton.language as tl
{HELPERS["_split_tf32"]}
torch.manual_seed(0)
x = torch.cat([torch.randn(4000) * 1e3, torch.tensor([3.4028234e38, -1.0000001, 1e-30, 0.0])])
parts = torch.empty(2 * x.numel())
_split_tf32[(triton.cdiv(x.numel(), 1024),)](x, parts, x.numel(), x.numel(), BLOCK=1024)
hi, lo = parts[: x.numel()], parts[x.numel():]
bits = parts.view(torch.int32) & 0x1FFF
ok = x != 0
rest = ((hi.double() + lo.double() - x.double()).abs() / x.double().abs())[ok].max().item()
alone = ((hi.double() - x.double()).abs() / x.double().abs())[ok].max().item()
print([int(bits.abs().max()), bool(torch.isfinite(parts).all()), rest, alone])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    low_bits, finite, rest, alone = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert low_bits == 0 and finite
    assert rest <= 2.0**-21 < alone


def test_a_split_gemm_verifies_under_the_harness_at_fp32(tmp_path):
    """As a GPU run writes it, on the Triton interpreter: both operands split by one launch
    each, each K step's three products of the parts added into the accumulator. fp32's
    tolerance fails a product of the high parts alone (off by about 1e-2 here), so passing needs
    the low parts too."""
    task = task_file(
        tmp_path, "torch.relu(x @ y) + 1", "torch.randn(512, 96), torch.randn(96, 640)"
    )
    gen = builtin_generator(task, "triton", tmp_path, device="cuda")
    default = gen.default_config()
    config = {  # 20 tiles start at tf32x3 (FEW_TILES): the split is what is judged here
        name: {**c, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "DOT": PRESPLIT}
        for name, c in default.items()
    }
    kernel = tmp_path / "kernel.py"
    kernel.write_text(gen.code(config))
    source = kernel.read_text()
    assert source.count("_split_tf32[") == 2
    assert source.count('input_precision="tf32")') == 3 and "acc += tl.dot(a, b, part" in source
    judge = EvalConfig(dsl="triton", device="cpu", seeds=2, profile=False)
    verdict = evaluate(task, kernel, judge, cache=EvalCache(tmp_path / "cache"), use_cache=False)
    assert verdict.passed, verdict.message


def _shared_bytes(config: dict) -> int:
    copies = 2 if config["DOT"] == PRESPLIT else 1
    tiles = config["BLOCK_M"] * config["BLOCK_K"] + config["BLOCK_K"] * config["BLOCK_N"]
    return config["num_stages"] * tiles * 4 * copies


def test_tuning_never_writes_a_gemm_whose_stages_exceed_shared_memory(tmp_path):
    """Split ahead, 128 x 128 x 32 tiles in 4 stages need 256 KB of shared memory, past an SM's
    227: Triton refuses them at compile time, so such a candidate was a tuning step spent on
    nothing. The neighbours of the default include them; the files the model writes do not."""
    from kernelgraph.tools.builtin.model import BuiltinModel, neighbours
    from kernelgraph.tools.builtin.module import read_config
    from kernelgraph.tools.builtin.triton_gemm import SHARED_LIMIT

    gen = builtin_generator(task_file(tmp_path, "x @ y", BIG), "triton", tmp_path, device="cuda")
    model = BuiltinModel()
    model.generator = lambda context: gen  # noqa: ARG005 - the same program every call
    default = model.code({}, [], None)
    [gemm] = [name for name, config in read_config(default).items() if "BLOCK_M" in config]
    raw = neighbours(read_config(default), gen.tunables())
    assert any(_shared_bytes(config[gemm]) > SHARED_LIMIT for config in raw)
    written = [read_config(code) for code in model.upcoming({}, [default], default, 10_000)]
    assert written and all(_shared_bytes(config[gemm]) <= SHARED_LIMIT for config in written)


@pytest.mark.parametrize("dot", [PRESPLIT, "tf32x3"])
def test_a_k_of_no_multiple_of_four_runs_whole_blocks_unmasked_and_verifies(tmp_path, dot):
    """K = 133: eight whole 16-deep blocks without a mask (a mask at K's end, constant over no
    group of four, kept Triton from vector loads: level1/8's K = 2949), then the masked last
    block; the split copies' low parts start 128-byte aligned past the high ones."""
    task = task_file(tmp_path, "x @ y", "torch.randn(512, 133), torch.randn(133, 512)")
    gen = builtin_generator(task, "triton", tmp_path, device="cuda")
    config = {
        name: {**c, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16, "DOT": dot}
        for name, c in gen.default_config().items()
    }
    kernel = tmp_path / "kernel.py"
    kernel.write_text(gen.code(config))
    source = kernel.read_text()
    assert "for kk in range(0, 133 // BLOCK_K):" in source and "if 133 % BLOCK_K != 0:" in source
    assert source.count("kmask = rk <") == 1
    if dot == PRESPLIT:
        lows = [int(n) for n in re.findall(r"_split_tf32\[.*?, (\d+), BLOCK=", source)]
        assert lows and all(low % 32 == 0 for low in lows)
    judge = EvalConfig(dsl="triton", device="cpu", seeds=2, profile=False)
    verdict = evaluate(task, kernel, judge, cache=EvalCache(tmp_path / "cache"), use_cache=False)
    assert verdict.passed, verdict.message
