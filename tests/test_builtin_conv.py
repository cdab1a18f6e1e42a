"""Convolutions written by the builtin under `strict` (implicit GEMM, or direct when depthwise),
verified by the real harness on the Triton interpreter: every geometry KernelBench's level 1
uses (1d/2d/3d, strided, padded, dilated, grouped, depthwise, transposed with output padding),
with a fused epilogue."""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys

import pytest
from builtin_helpers import builtin_generator, task_file
from test_builtin import generate, verify

from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.model import BuiltinModel
from kernelgraph.tools.builtin.module import read_config
from kernelgraph.tools.builtin.tf32_copies import ROUNDINGS
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate

CONVS = {
    "1d_dilated_strided": ("self.c(x) * 2", "torch.randn(2, 3, 21)",
                           "self.c = nn.Conv1d(3, 5, 3, stride=3, dilation=2)"),
    "2d_grouped_asymmetric_relu": (
        "torch.relu(self.c(x))", "torch.randn(2, 4, 9, 8)",
        "self.c = nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)"),
    "3d_no_bias_padded": ("self.c(x)", "torch.randn(1, 2, 5, 6, 4)",
                          "self.c = nn.Conv3d(2, 3, (3, 2, 3), padding=1, bias=False)"),
    "2d_depthwise": ("self.c(x) + 1", "torch.randn(2, 4, 7, 9)",
                     "self.c = nn.Conv2d(4, 4, (3, 5), padding=(1, 2), stride=(1, 2), groups=4)"),
    "1d_transposed_grouped_output_padding": (
        "self.t(x)", "torch.randn(2, 4, 7)",
        "self.t = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)"),
    "2d_transposed_dilated": (
        "torch.tanh(self.t(x))", "torch.randn(1, 3, 5, 4)",
        "self.t = nn.ConvTranspose2d(3, 4, (3, 2), stride=(2, 3), padding=(2, 1), dilation=(2, 1))"),
    "3d_transposed_strided_few_channels": (  # the flat K loop over each stride phase's taps
        "self.t(x) * 2", "torch.randn(2, 3, 3, 4, 5)",
        "self.t = nn.ConvTranspose3d(3, 4, (3, 2, 3), stride=(2, 2, 1), padding=(1, 0, 1), "
        "output_padding=(1, 1, 0))"),
    "3d_transposed_depthwise": (
        "self.t(x)", "torch.randn(1, 2, 3, 4, 3)",
        "self.t = nn.ConvTranspose3d(2, 2, 2, stride=2, groups=2)"),
}  # fmt: skip


@pytest.fixture(params=["flat_k", "channel_loop", "channel_loop_k_major"])
def k_loop(request, monkeypatch):
    """Both K loops on every geometry: (input channel, kernel position) flattened, and kernel
    positions then channel blocks (with stride phases when transposed), which KernelBench's
    sizes take (8 or more input channels per group); the latter also with the operands copied
    channels-last as for tensor cores."""
    if request.param != "flat_k":
        monkeypatch.setattr("kernelgraph.tools.builtin.conv.CHANNEL_LOOP_MIN", 1)
    if request.param == "channel_loop_k_major":
        request.getfixturevalue("tensor_cores")
        monkeypatch.setattr("kernelgraph.tools.builtin.layouts.MIN_CONV_REUSE", 1)  # these are tiny
        monkeypatch.setattr("kernelgraph.tools.builtin.layouts.IN_PLACE_DIMS", 0)
    return request.param


@pytest.mark.parametrize("name", list(CONVS))
def test_convolutions_verify_under_strict(tmp_path, name, k_loop):
    forward, inputs, params = CONVS[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, tmp_path)
    source = kernel.read_text()
    assert "torch.convolution" not in source and "tl.load" in source
    assert ("tl.dot" in source) != ("depthwise" in name)  # depthwise: the direct kernel
    if "depthwise" not in name:
        assert ("for kk in range" in source) == (k_loop == "flat_k")
        assert ("_x_channels_last = " in source) == (k_loop == "channel_loop_k_major")
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


def _with_block_k(block_k: int):
    def config(generator):
        defaults = generator.default_config()
        return {name: {**c, "BLOCK_K": block_k} if "BLOCK_K" in c else c
                for name, c in defaults.items()}  # fmt: skip

    return config


@pytest.mark.parametrize(
    ("params", "one_loop"),
    [("self.c = nn.Conv2d(40, 6, (3, 2), padding=1, dilation=(1, 2))", True),
     ("self.c = nn.ConvTranspose2d(40, 6, 3, stride=2, padding=1)", False),
     ("self.c = nn.Conv2d(40, 6, 1)", False)],
    ids=["stride_1", "transposed_stride_phases", "one_position"],
)  # fmt: skip
def test_the_channel_loop_walks_partial_channel_blocks(tmp_path, monkeypatch, params, one_loop):
    """40 input channels in blocks of 16 (the last one partial). A stride-1 convolution walks
    (kernel position, channel block) in one loop, which Triton can pipeline; stride phases keep
    the kernel-position loop, whose test skips the positions that miss a phase; a 1x1
    convolution loops over channel blocks alone, its position hoisted."""
    monkeypatch.setattr("kernelgraph.tools.builtin.conv.CHANNEL_LOOP_MIN", 1)
    task = task_file(tmp_path, "self.c(x)", "torch.randn(1, 40, 5, 6)", params=params)
    kernel = generate(task, tmp_path, config=_with_block_k(16))
    source = kernel.read_text()
    assert ("for kc in range" in source) == one_loop
    assert ("for c0 in range" in source) != one_loop
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    ("params", "k", "phases"),
    [("self.t = nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1)", 3 * 2 * 2 * 2, 8),
     ("self.t = nn.ConvTranspose3d(3, 4, 3, stride=(2, 1, 2), padding=1)", 3 * 2 * 3 * 2, 4),
     ("self.t = nn.ConvTranspose3d(3, 4, 3, stride=2, dilation=2)", 3 * 27, 1)],
    ids=["stride_2", "stride_1_along_one_dim", "dilated"],
)  # fmt: skip
def test_a_few_channel_transposed_convolution_loops_over_its_phase_taps(
    tmp_path, params, k, phases
):
    """Each stride phase's flat K holds only the kernel positions that reach it (level2/89: 24
    columns, not 81 of which 7 in 8 are masked); with dilation all positions stay, unphased.
    Few products per output, but the flat loop keeps every dim phased (`inner_unphased`)."""
    task = task_file(tmp_path, "self.t(x)", "torch.randn(1, 3, 3, 4, 3)", params=params)
    kernel = generate(task, tmp_path)
    source = kernel.read_text()
    assert f"for kk in range(0, tl.cdiv({k}, BLOCK_K))" in source
    assert f" * {phases}, 1)](" in source  # phases: the fastest grid index
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


TRANSPOSED = {
    "2d_channel_loop": ("torch.randn(1, 8, 4, 5)", "nn.ConvTranspose2d(8, 4, 3, stride=(2, 3), "
                        "padding=1, dilation=(1, 2), output_padding=(1, 0))", [2, 3]),
    "3d_channel_loop": ("torch.randn(1, 8, 3, 4, 3)",
                        "nn.ConvTranspose3d(8, 4, (3, 2, 3), stride=2, padding=1)", [2, 2, 2]),
    "1d_channel_loop": ("torch.randn(2, 8, 6)", "nn.ConvTranspose1d(8, 4, 3, stride=3, dilation=2)",
                        [3]),
}  # fmt: skip


@pytest.mark.parametrize("name", list(TRANSPOSED))
@pytest.mark.parametrize("inner", ["phased", "in_output_order"])
def test_a_narrow_transposed_convolution_stores_its_innermost_dim_in_output_order(
    tmp_path, monkeypatch, name, inner
):
    """Few products a row (level1/81: 57.6): the innermost dim is not grouped by stride phase,
    each row masks the taps that miss it, and a tile stores whole lines; the outer dims keep
    their phases. Both forms verify."""
    inputs, module, stride = TRANSPOSED[name]
    if inner == "phased":
        monkeypatch.setattr("kernelgraph.tools.builtin.conv.UNPHASED_MAX_K", 0)
    task = task_file(tmp_path, "self.t(x)", inputs, params=f"self.t = {module}")
    kernel = generate(task, tmp_path)
    source = kernel.read_text()
    last, phases = len(stride) - 1, math.prod(stride)
    if inner == "in_output_order":
        phases //= stride[-1]
        assert f"(t{last} % {stride[-1]} == 0)" in source  # a per-row mask, not a phase's test
    assert f" * {phases}, 1)](" in source  # the phases left: the fastest grid index
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    ("inputs", "module", "unphased"),
    [("1, 32, 4, 4", "nn.ConvTranspose2d(32, 64, 3, stride=5, padding=1, dilation=2)", True),
     ("1, 32, 4", "nn.ConvTranspose1d(32, 64, 3, stride=2, padding=1, dilation=2)", True),
     ("1, 32, 4, 4", "nn.ConvTranspose2d(32, 64, (3, 5), stride=(2, 3), groups=4)", False),
     ("1, 32, 4, 4, 4", "nn.ConvTranspose3d(32, 64, 3, stride=2, padding=1)", False),
     ("1, 3, 4, 4", "nn.ConvTranspose2d(3, 4, 3, stride=2)", False)],
    ids=["level1_81", "level1_79", "level1_75_groups", "level1_73", "flat_k_loop"],
)  # fmt: skip
def test_which_transposed_convolutions_leave_their_innermost_dim_in_output_order(
    tmp_path, inputs, module, unphased
):
    """Products a row sums in output order: 32 x 9 / 5 and 32 x 3 are few; 16 (8 channels, a
    16-deep dot) x 15 / 2 and 32 x 27 / 4 are not; the flat loop keeps its phases."""
    task = task_file(tmp_path, "self.t(x)", f"torch.randn({inputs})", params=f"self.t = {module}")
    generator = builtin_generator(task, "triton", tmp_path, "strict")
    assert [k.inner_unphased for k in generator.program.kernels] == [unphased]


def test_a_convolution_then_batch_norm_in_training_mode_verifies_under_strict(tmp_path):
    task = task_file(tmp_path, "F.relu(self.bn(self.c(x)))", "torch.randn(2, 3, 6, 6)",
                     params="self.c = nn.Conv2d(3, 4, 3); self.bn = nn.BatchNorm2d(4)")  # fmt: skip
    verdict = verify(task, generate(task, tmp_path), tmp_path)
    assert verdict.passed, verdict.message


def test_the_cpp_backend_names_the_convolution_and_the_way_out(tmp_path):
    from builtin_helpers import builtin_generator

    task = task_file(tmp_path, *CONVS["2d_grouped_asymmetric_relu"][:2],
                     params=CONVS["2d_grouped_asymmetric_relu"][2])  # fmt: skip
    with pytest.raises(Unsupported) as info:
        builtin_generator(task, "cpp", tmp_path)
    message = str(info.value)
    assert "conv kernel in cpp" in message and "--policy hybrid" in message


@pytest.mark.parametrize(
    ("precision", "module", "dots"),
    [
        ("fp32", "nn.Conv2d(16, 8, 3)", ["tf32rna", "tf32rn", "tf32x3", "ieee"]),
        ("ieee", "nn.Conv2d(16, 8, 3)", ["tf32x3", "ieee"]),
        (
            "fp32",
            "nn.ConvTranspose2d(16, 8, 3, padding=2)",
            ["tf32rn", "tf32rna", "tf32x3", "ieee"],
        ),
        ("fp32", "nn.Conv2d(16, 8, 3, groups=2)", ["tf32x3", "tf32rna", "tf32rn", "ieee"]),
        (  # grouped, 8 input channels a group: cuDNN ran level1/72 and 75 without TF32
            "fp32",
            "nn.ConvTranspose2d(16, 8, 3, padding=2, groups=2)",
            ["tf32x3", "tf32rn", "tf32rna", "ieee"],
        ),
        ("fp32", "nn.Conv2d(16, 8, 3, groups=4)", ["fma", "tf32rna", "tf32rn", "tf32x3", "ieee"]),
        (  # 324 taps a group: too many for fma
            "fp32",
            "nn.Conv2d(16, 8, 9, padding=3, groups=4)",
            ["tf32x3", "tf32rna", "tf32rn", "ieee"],
        ),
        (
            "fp32",
            "nn.Conv2d(16, 8, 3, stride=2, padding=3, groups=2)",
            ["tf32rna", "tf32rn", "tf32x3", "ieee"],
        ),
    ],
)
def test_a_gpu_convolution_tries_each_precision_before_any_tiling(
    tmp_path, precision, module, dots
):
    """At fp32 the reference is cuDNN with PyTorch's flags, TF32 on, so a GPU conv starts with
    one TF32 product of operands rounded to nearest as cuDNN's kernels round them: ties away
    for a forward convolution, ties to even for a transposed one, the other rounding next
    (benchmarks/RESULTS.md), except a stride-1 one of at most 8 input channels per group, or a
    grouped transposed one of at most 8, which cuDNN ran without TF32: exact FMA outer products where it has few taps and fewer than 8
    channels (no channel loop), else tf32x3;
    `ieee` starts at tf32x3. The space lists them fastest first. Until one verifies, every other DOT comes
    before any tiling change, fastest first; once one verifies, only a faster DOT no config
    tried comes before the tiling changes. GEMMs, judged against IEEE matmuls, start at tf32x3
    either way."""
    task = task_file(tmp_path, "self.c(x) + x[:, :8, 1:-1, 1:-1] @ self.w", "torch.randn(2, 16, 9, 9)",
                     params=f"self.c = {module}; self.w = nn.Parameter(torch.randn(7, 7))")  # fmt: skip
    gen = builtin_generator(task, "triton", tmp_path, device="cuda", precision=precision)
    default, spaces = gen.default_config(), gen.tunables()
    conv = next(name for name in default if "convolution" in name)
    gemm = next(name for name in default if name != conv and "DOT" in default[name])
    fastest = sorted(dots, key=lambda dot: dot not in ROUNDINGS)  # one TF32 product, likelier first
    assert (default[conv]["DOT"], spaces[conv]["DOT"]) == (dots[0], fastest)
    assert default[gemm]["DOT"] == "tf32x3"
    model = BuiltinModel()
    model.generator = lambda context: gen  # noqa: ARG005 - the same program every call
    tried: list[str] = []
    for _ in range(len(dots) + 1):  # the default, then every other DOT of either kernel
        tried.append(model.code({}, tried, None))
    configs = [read_config(code) for code in tried]
    assert all(_tiles(config) == _tiles(default) for config in configs)  # no tiling change
    assert [c[conv]["DOT"] for c in configs if c[gemm] == default[gemm]] == dots
    refine = read_config(model.code({}, tried, tried[1]))  # the second precision verified
    assert refine[conv]["DOT"] == dots[1] and refine[gemm]["DOT"] == "tf32x3"
    assert refine != configs[1]
    first = read_config(model.code({}, tried[:1], tried[0]))  # the default verified at once
    space = spaces[conv]["DOT"]
    faster = space[: space.index(dots[0])]  # untried, so tried next (tf32rna after tf32x3)
    assert first[conv]["DOT"] == (faster[0] if faster else dots[0])
    assert (_tiles(first) == _tiles(default)) == bool(faster)  # else a tiling change


def _tiles(config: dict) -> dict:
    return {
        kernel: {p: v for p, v in params.items() if p != "DOT"} for kernel, params in config.items()
    }


ULP = 2.0**-10  # of TF32's 10-bit mantissa, at 1.0


@pytest.mark.parametrize(
    ("dot", "ties"),
    [
        ("tf32rn", [1.0, 1 + 2 * ULP, -1.0]),  # to even
        ("tf32rna", [1 + ULP, 1 + 3 * ULP, -(1 + ULP)]),  # away from zero
    ],
)
def test_tf32_roundings_round_to_nearest_and_break_ties_their_way(dot, ties):
    """The roundings the tf32rn/tf32rna products apply to their operands, run by the Triton
    interpreter in a subprocess: to the nearest value with a 10-bit mantissa, ties to even or
    away from zero, as cuDNN's kernels do (each matched some of KernelBench's convolutions on
    the GPU and missed the others)."""
    script = f"""
import torch, triton, triton.language as tl

@triton.jit
def rn(x_ptr, out_ptr):
    offs = tl.arange(0, 8)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, {ROUNDINGS[dot].format(x="x")})

ulp = 2.0 ** -10
x = torch.tensor([1 + 0.49 * ulp, 1 + 0.5 * ulp, 1 + 0.51 * ulp, -(1 + 0.5 * ulp),
                  1 + 1.5 * ulp, 1 + 2.5 * ulp, 1e-30, -7.25], dtype=torch.float32)
out = torch.empty_like(x)
rn[(1,)](x, out)
print(out.tolist())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rounded = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert rounded[0] == 1.0 and rounded[2] == 1 + ULP and rounded[4] == 1 + 2 * ULP  # nearest
    assert [rounded[1], rounded[5], rounded[3]] == ties  # 1 + ULP/2, 1 + 5 ULP/2, -(1 + ULP/2)
    assert rounded[7] == -7.25 and abs(rounded[6] - 1e-30) <= 1e-30 * ULP


@pytest.mark.parametrize(
    ("out_channels", "channels_last", "dot", "ties"),
    [  # 32 x 9 uses of each input element pay for a channels-last copy
        (16, False, "tf32rna", "bits + 0x1000"),
        (32, True, "tf32rn", "bits + 0xFFF + ((bits >> 13) & 1)"),
    ],
)
def test_a_tf32_rounded_convolution_takes_its_operands_rounded_once_and_computes_their_product(
    tmp_path, tensor_cores, out_channels, channels_last, dot, ties
):
    """As a GPU run writes it (tf32rna first, tf32rn next), on the Triton interpreter: the
    weights are rounded by a kernel launched once, the input too where the launch copies it
    channels-last (else in the K loop); the harness passes it under strict at TF32's tolerance (a rounding done with
    torch ops was rejected there), and, run in a subprocess, the result is the convolution of
    both operands rounded to TF32, not the fp32 one."""
    task = task_file(tmp_path, "self.c(x)", "torch.randn(2, 24, 7, 6)",
                     params=f"self.c = nn.Conv2d(24, {out_channels}, 3, padding=1, bias=False)")  # fmt: skip
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    default = generator.default_config()
    assert next(iter(default.values()))["DOT"] == "tf32rna"  # a forward convolution
    config = {name: {**c, "BLOCK_M": 32, "BLOCK_K": 16, "DOT": dot} for name, c in default.items()}
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator.code(config))
    source = kernel.read_text()
    assert source.count(f"_round_{dot}[") == 1
    assert source.count(f"_channels_last_{dot}[") == int(channels_last)
    assert ("a = ((a.to(tl.uint32" in source) is not channels_last  # A rounded in the loop
    assert "b = ((b.to(tl.uint32" not in source
    tf32_judge = EvalConfig(dsl="triton", device="cpu", seeds=1, profile=False, precision="tf32")
    verdict = evaluate(
        task, kernel, tf32_judge, cache=EvalCache(tmp_path / "cache"), use_cache=False
    )
    assert verdict.passed, verdict.message  # the launch computes nothing strict forbids
    script = f"""
import importlib.util, sys, torch
import torch.nn.functional as F
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    return module
task, kernel = load({str(task)!r}, "task"), load({str(kernel)!r}, "kernel")
torch.manual_seed(0)
model = kernel.ModelNew(*task.get_init_inputs())
x = task.get_inputs()[0]
def tf32(t):
    bits = t.view(torch.int32)
    return (({ties}) & -8192).view(torch.float32)
with torch.no_grad():
    got = model(x).double()
    w = model.c.weight
    rounded = F.conv2d(tf32(x).double(), tf32(w).double(), padding=1)
    exact = F.conv2d(x.double(), w.double(), padding=1)
print((got - rounded).abs().max().item(), (got - exact).abs().max().item())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    off_rounded, off_exact = map(float, done.stdout.split()[-2:])
    assert off_rounded < 1e-5 < off_exact


@pytest.mark.parametrize(
    ("module", "dot", "block_k"),
    [
        ("nn.Conv2d(3, 8, 5)", "fma", 16),  # K = 75
        ("nn.Conv2d(3, 8, 3)", "tf32x3", 32),  # K = 27: one step, no fma
        ("nn.Conv2d(3, 8, 5, stride=2)", "tf32rna", 32),
        ("nn.Conv2d(3, 8, (9, 10), padding=(4, 5))", "tf32x3", 16),  # 270 taps: no fma
    ],
)
def test_a_narrow_convolution_takes_shallower_blocks_for_three_products(
    tmp_path, module, dot, block_k
):
    """tf32x3 makes three products per K step: level1/54 (K = 81) ran 1.5x faster at 16-deep
    blocks, level1/59 (K = 27) 1.7x slower than in one 32-deep step. fma has no K blocks; its
    depth is tf32x3's, the DOT tried after it."""
    task = task_file(tmp_path, "self.c(x)", "torch.randn(2, 3, 9, 9)", params=f"self.c = {module}")
    (params,) = builtin_generator(task, "triton", tmp_path, device="cuda").default_config().values()
    assert (params["DOT"], params["BLOCK_K"]) == (dot, block_k)


@pytest.mark.parametrize(
    ("module", "inputs", "block_k", "warps"),
    [("nn.Conv1d(64, 128, 3)", "torch.randn(2, 64, 50)", 16, 4),  # level1/67: read in place
     ("nn.Conv2d(64, 128, 3)", "torch.randn(2, 64, 12, 12)", 32, 8)],  # a channels-last copy
    ids=["in_place", "copied"],
)  # fmt: skip
def test_a_convolution_read_in_place_takes_shallow_blocks_at_four_warps(
    tmp_path, module, inputs, block_k, warps
):
    """Input lines read in place, taps in turn: 16-deep blocks, and 4 warps a 128-row tile
    (level1/64, 67, 74 and 75 ran 4-15% faster than at 8 on the H100)."""
    task = task_file(tmp_path, "self.c(x)", inputs, params=f"self.c = {module}")
    (params,) = builtin_generator(task, "triton", tmp_path, device="cuda").default_config().values()
    assert (params["BLOCK_K"], params["num_warps"]) == (block_k, warps)


FEW_TAPS = {
    "3d_padded_dilated_strided": (
        "self.c(x) * 2", "torch.randn(2, 3, 5, 6, 7)",
        "self.c = nn.Conv3d(3, 5, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 2), "
        "dilation=(1, 2, 2))"),
    "2d_grouped_no_bias": ("torch.relu(self.c(x))", "torch.randn(2, 4, 7, 6)",
                           "self.c = nn.Conv2d(4, 6, 3, padding=1, groups=2, bias=False)"),
    "1d_partial_channel_tile": ("self.c(x) - 1", "torch.randn(2, 2, 30)",
                                "self.c = nn.Conv1d(2, 40, 5, padding=3, dilation=2)"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(FEW_TAPS))
def test_a_few_tap_convolution_adds_exact_fma_outer_products(tmp_path, name):
    """DOT "fma" (a GPU run's first DOT for a narrow stride-1 convolution; any forward geometry
    is written right), on the Triton interpreter: no tl.dot, the weights
    copied tap-major once per forward, padding, stride, dilation and groups honoured, the
    epilogue fused; the harness verifies it at fp32 under strict."""
    forward, inputs, params = FEW_TAPS[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    config = {kernel: {**c, "BLOCK_M": 32, "DOT": "fma"}
              for kernel, c in generator.default_config().items()}  # fmt: skip
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator.code(config))
    source = kernel.read_text()
    assert "tl.dot" not in source and source.count("_w_taps = ") == 1
    judge = EvalConfig(dsl="triton", device="cpu", seeds=1, profile=False)
    verdict = evaluate(task, kernel, judge, cache=EvalCache(tmp_path / "cache"))
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    ("params", "copied"),
    [("self.c = nn.Conv2d(16, 32, (1, 3), stride=(1, 3), dilation=(1, 4))", False),  # 32 x 3 / 3 uses
     ("self.c = nn.Conv2d(16, 32, (1, 3), dilation=(1, 4))", True),  # 32 x 3 uses
     ("self.t = nn.ConvTranspose2d(16, 32, (1, 3), stride=(1, 3))", True),  # scattered: 32 x 3
     ("self.c = nn.Conv1d(16, 32, 3, dilation=4)", False)],  # 1d: in place at any reuse
    ids=["forward_strided", "forward", "transposed_strided", "forward_1d"],
)  # fmt: skip
def test_the_channels_last_copy_counts_a_forward_strides_reuse(tmp_path, monkeypatch, tensor_cores,
                                                               params, copied):  # fmt: skip
    """A forward convolution reads each input element cout_g x taps / stride times: level1/76
    (stride 3) read its 8.6 GB input about once a tile, so copying it first cost more than it
    saved. Threshold lowered to 64 here: 96 uses copy, 32 do not; a 1d convolution, whose taps
    re-read their lines from L1, is never copied."""
    monkeypatch.setattr("kernelgraph.tools.builtin.layouts.MIN_CONV_REUSE", 64)
    forward = "self.t(x)" if "Transpose" in params else "self.c(x)"
    inputs = "torch.randn(1, 16, 40)" if "1d" in params else "torch.randn(1, 16, 2, 40)"
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, tmp_path)
    assert ("_x_channels_last = " in kernel.read_text()) == copied
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    ("params", "inputs", "taps_in_turn"),
    [("self.c = nn.Conv1d(40, 24, 3, stride=3, dilation=4)", "torch.randn(2, 40, 50)", "kpos = kc % 3"),
     ("self.c = nn.Conv2d(36, 24, 3, stride=2, padding=1, groups=2)", "torch.randn(2, 36, 9, 9)", "kpos = kc % 9"),
     ("self.t = nn.ConvTranspose1d(40, 24, 3, stride=2, padding=1, dilation=2)", "torch.randn(2, 40, 30)", None)],
    ids=["forward_strided", "forward_grouped", "transposed_strided"],
)  # fmt: skip
def test_a_convolution_read_in_place_takes_its_weights_channels_contiguous(
    tmp_path, tensor_cores, params, inputs, taps_in_turn
):
    """An input too little reused for its channels-last copy is read in place, but the weights
    (reused by every output position) are still copied as [group, *k, cout_g, cin_g], so B's
    K elements are contiguous; a channel block's taps run in turn (their input lines overlap).
    BLOCK_K 16 makes several channel blocks; verified under the harness."""
    forward = "self.t(x)" if "Transpose" in params else "self.c(x)"
    task = task_file(tmp_path, forward, inputs, params=params)

    def deep16(generator):
        return {k: {**c, "BLOCK_K": 16} for k, c in generator.default_config().items()}

    kernel = generate(task, tmp_path, config=deep16)
    source = kernel.read_text()
    assert "_x_channels_last = " not in source
    assert source.count("_w_k_major = ") == 1 and ".permute(" in source
    if taps_in_turn:
        assert taps_in_turn in source
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message
