"""The builtin model's Triton kernels, verified by the real harness (Triton interpreter on CPU).

Each case is a small KernelBench-format task written here; the builtin generates the kernel
file from the task's analysis and the sandboxed harness must pass it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.analysis import analyze_task
from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.expr import call, var, walk
from kernelgraph.tools.builtin.lowering import POINTWISE as LOWERINGS
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.task import TaskSource

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def generate(task: Path, tmp_path: Path, policy: str = "strict", config=None) -> Path:
    generator = builtin_generator(task, "triton", tmp_path, policy)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator.code(config(generator) if config else None))
    return kernel


def verify(task: Path, kernel: Path, tmp_path: Path, policy: str = "strict"):
    config = EvalConfig(dsl="triton", device="cpu", seeds=1, profile=False, policy=policy)
    return evaluate(task, kernel, config, cache=EvalCache(tmp_path / "cache"))


X3 = "torch.randn(3, 5, 7)"
POINTWISE = {
    "activations": "(F.gelu(x), F.gelu(x, approximate='tanh'), F.mish(x), F.mish(x * 40), "
    "torch.tanh(F.softplus(x * 40)) * x, F.softplus(x), "
    "F.elu(x), F.selu(x), torch.sigmoid(x), torch.tanh(x), F.silu(x))",
    "clamps": "(F.leaky_relu(x, 0.1), F.hardtanh(x, -0.5, 0.5), F.hardsigmoid(x), "
    "F.hardswish(x), torch.clamp(x, min=-0.2, max=0.3), F.relu6(x * 4), F.softsign(x), F.relu(x))",
    "arithmetic": "(torch.sqrt(x.abs()) + torch.rsqrt(x.abs() + 1), x ** 3, torch.exp(x) / 2, "
    "torch.log(x.abs() + 1) - 1, torch.where(x > 0.1, x, y), (x >= y).float(), x * y - 2 / (y.abs() + 1))",
    "broadcasts": "(x + self.bias, x * self.channel, 3.0 - x, x.view(3, 35) + 1)",
}


def test_mish_and_mish_written_out_take_one_exp_and_one_division():
    x = var("x")
    written_out = LOWERINGS["tanh"]([LOWERINGS["softplus"]([x], {})], {})
    ops = [e.op for e in set(walk(written_out))]  # distinct subexpressions, as printed
    assert "tanh" not in ops and "log1p" not in ops
    assert ops.count("exp") == 1 and ops.count("div") == 1
    assert LOWERINGS["mish"]([x], {}) == call("mul", x, written_out)
    assert LOWERINGS["tanh"]([x], {}) == call("tanh", x)  # any other tanh stays one


@pytest.mark.parametrize("name", list(POINTWISE))
def test_pointwise_chains_verify(tmp_path, name):
    params = (
        "self.bias = nn.Parameter(torch.randn(7)); self.channel = nn.Parameter(torch.randn(5, 1))"
    )
    task = task_file(tmp_path, POINTWISE[name], f"{X3}, {X3}", params=params)
    verdict = verify(task, generate(task, tmp_path), tmp_path)
    assert verdict.passed, verdict.message


REDUCE = "(torch.sum(F.relu(x), dim={d}) * 2, torch.mean(x, dim={d}, keepdim=True), " \
    "torch.amax(x, dim={d}), torch.min(x, dim={d}).values, torch.argmax(x, dim={d}), " \
    "torch.argmin(x, dim={d}), torch.prod(x, dim={d}), torch.var(x, dim={d}), " \
    "*torch.var_mean(x, dim={d}))"  # fmt: skip


@pytest.mark.parametrize("dim", [-1, 1], ids=["last_dim", "middle_dim"])
def test_reductions_verify_on_contiguous_and_strided_rows(tmp_path, dim):
    task = task_file(tmp_path, REDUCE.format(d=dim), X3)
    verdict = verify(task, generate(task, tmp_path), tmp_path)
    assert verdict.passed, verdict.message


SOFTMAX = (
    "(torch.softmax(x * 0.5, dim=-1), torch.log_softmax(x, dim=1), torch.logsumexp(x, dim=-1))"
)


def _small_row_blocks(generator):
    """Rows longer than the block: the multi-pass loop instead of one persistent block."""
    config = generator.default_config()
    for params in config.values():
        if "BLOCK_R" in params:
            params["BLOCK_R"] = 4
    return config


@pytest.mark.parametrize(
    "config, inputs",
    [(None, X3), (_small_row_blocks, X3), (_small_row_blocks, "torch.randn(3, 5, 7) * 30 - 200")],
    ids=["persistent", "looped", "looped_far_negative"],
)
def test_softmax_family_verifies(tmp_path, config, inputs):
    """Looped rows take the max and the sum in one online pass; rows far below zero check that
    an empty lane's rescale (exp of a huge number) never reaches the sum."""
    task = task_file(tmp_path, SOFTMAX, inputs)
    kernel = generate(task, tmp_path, config=config)
    if config is not None:
        source = kernel.read_text()
        assert "for start in range" in source
        assert source.count("new0 = tl.maximum") == 3  # one online pass per kernel
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


NORMS = {
    "layer_group_instance": (
        "(self.ln(x), self.gn(x), self.inorm(x))",
        "torch.randn(2, 4, 3, 5)",
        "self.ln = nn.LayerNorm([3, 5]); self.gn = nn.GroupNorm(2, 4); "
        "self.inorm = nn.InstanceNorm2d(4, affine=True)",
    ),
    "rms_l1_l2_frobenius": (
        "(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w, "
        "x / torch.norm(x, p=2, dim=1, keepdim=True), x / x.abs().sum(dim=1, keepdim=True), "
        "x / torch.norm(x, p='fro'))",
        "torch.randn(6, 16)",
        "self.w = nn.Parameter(torch.randn(16))",
    ),
}


@pytest.mark.parametrize("name", list(NORMS))
def test_normalisations_verify(tmp_path, name):
    forward, inputs, params = NORMS[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    verdict = verify(task, generate(task, tmp_path), tmp_path)
    assert verdict.passed, verdict.message


GEMMS = {
    "linear_relu_3d": ("torch.relu(self.fc(x)) * 2", "torch.randn(2, 5, 16)",
                       "self.fc = nn.Linear(16, 12)"),
    "bmm_scale_residual": ("torch.bmm(x, y) * 0.5 + 1", "torch.randn(2, 9, 7), torch.randn(2, 7, 5)", ""),
    "transposed_b_bias": ("F.gelu(x @ y.t() + self.b)", "torch.randn(9, 20), torch.randn(6, 20)",
                          "self.b = nn.Parameter(torch.randn(6))"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(GEMMS))
def test_gemms_with_epilogues_verify(tmp_path, name):
    forward, inputs, params = GEMMS[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, tmp_path)
    assert "tl.dot" in kernel.read_text()
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


CONV = ("torch.tanh(self.conv(x) + self.b)", "torch.randn(2, 3, 6, 6)",
        "self.conv = nn.Conv2d(3, 4, 3, bias=False); self.b = nn.Parameter(torch.randn(4, 1, 1))")  # fmt: skip


def test_conv_is_kept_as_a_library_call_under_hybrid_with_the_rest_fused(tmp_path):
    task = task_file(tmp_path, *CONV[:2], params=CONV[2])
    kernel = generate(task, tmp_path, policy="hybrid")
    text = kernel.read_text()
    assert "torch.convolution(" in text and "hybrid" in text.splitlines()[1]
    assert text.count("@triton.jit") == 2  # the prelude's combine helper and one fused kernel
    verdict = verify(task, kernel, tmp_path, policy="hybrid")
    assert verdict.passed, verdict.message


def test_a_forward_that_is_only_a_library_call_is_not_a_kernel_under_hybrid(tmp_path):
    task = task_file(tmp_path, "self.conv(x)", CONV[1], params="self.conv = nn.Conv2d(3, 4, 3)")
    with pytest.raises(Unsupported, match="aten.convolution") as info:
        generate(task, tmp_path, policy="hybrid")
    assert "leaves nothing to write" in str(info.value)


def test_an_unwritable_op_names_itself(tmp_path):
    task = task_file(tmp_path, "torch.sort(x, dim=1).values", X3)
    with pytest.raises(Unsupported, match="aten.sort") as info:
        generate(task, tmp_path, policy="hybrid")
    assert "--policy hybrid" not in str(info.value)  # a sort is not a library call either


@pytest.mark.parametrize(
    ("example", "kinds"),
    [
        ("softmax", ["softmax"]),
        ("layernorm", ["norm"]),
        ("swish_bias_clamp", ["pointwise"]),
        ("mean_over_dim1", ["reduction"]),
        ("linear_gelu_scale", ["gemm"]),
        ("matmul", ["gemm"]),
        ("conv3x3_relu", ["conv"]),
    ],
)
def test_examples_are_classified(tmp_path, example, kinds):
    task = TaskSource.read(EXAMPLES / example / "task.py")
    analysis = analyze_task(task, "cpu", cache=EvalCache(tmp_path))
    assert [s["kind"] for s in analysis["stages"]] == kinds


SPLIT = {
    "frobenius": ("x / torch.norm(x, p='fro')", "torch.randn(6, 16)", ""),
    "softmax_of_few_rows": ("torch.softmax(x, dim=-1) + x.sum(dim=-1, keepdim=True)",
                            "torch.randn(2, 40)", ""),
    "gemm_split_k": ("torch.relu(x @ y) + 1", "torch.randn(8, 96), torch.randn(96, 4)", ""),
    "group_norm": ("self.gn(x)", "torch.randn(3, 4, 5, 9)", "self.gn = nn.GroupNorm(2, 4)"),
    "sign_of_row_sum": ("torch.where(x.sum(-1, keepdim=True) > 0, x, -x)", "torch.randn(6, 40)",
                        ""),
    "mse_loss": ("F.mse_loss(x, y)", "torch.randn(6, 40), torch.randn(6, 40)", ""),
    "smooth_l1_loss": ("F.smooth_l1_loss(x, y)", "torch.randn(6, 40), torch.randn(6, 40)", ""),
    "row_max_and_mean": ("torch.stack([x.amax(dim=1), x.mean(dim=1)])", "torch.randn(3, 40)", ""),
}  # fmt: skip
# stores of one value a row only: each row's last partial program stores them. Their fills:
# one a scratch dtype and identity (sums and the counter share theirs) a split kernel
LAST_PROGRAM = {"mse_loss": 1, "smooth_l1_loss": 1, "row_max_and_mean": 3}


@pytest.mark.parametrize("name", list(SPLIT))
def test_split_reductions_and_split_k_verify(tmp_path, monkeypatch, name):
    """Few rows or tiles: chunks across programs, combined with atomics, then the epilogue."""
    from kernelgraph.tools.builtin.triton_backend import TritonBackend

    monkeypatch.setattr(TritonBackend, "split_rows", lambda self, kernel: True)
    monkeypatch.setattr(TritonBackend, "split_k", lambda self, kernel: 3)
    monkeypatch.setattr(TritonBackend, "default", _small_blocks(TritonBackend.default))
    forward, inputs, params = SPLIT[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, tmp_path)
    source = kernel.read_text()
    assert "tl.atomic_" in source
    if name != "gemm_split_k":  # sums of many chunks accumulate in fp64, not fp32
        assert "dtype=torch.float64" in source and ".to(tl.float64)" in source
        assert "for b in range(0, BLOCKS)" in source  # two chunks a program, the last short
    if name == "group_norm":  # mean and 1/std once a row, not at every element
        assert "_rowvals[" in source
    if name == "sign_of_row_sum":  # a comparison is no float to hold in a row value
        assert "_rowvals[" not in source
    if name in LAST_PROGRAM:  # no kernel after the partials, one fill for the sums and counter
        assert "if arrived.to(tl.int32) == tl.num_programs(0) - 1:" in source
        assert "_row[" not in source and "_full[" not in source
        assert source.count("torch.full(") == LAST_PROGRAM[name]
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("block", [16, 256])  # blocks that do not and do divide the period
def test_an_operand_reused_per_repeat_is_read_repeat_major(tmp_path, monkeypatch, block):
    """x * y with y as long as a row (a layer norm's weight): block b of every row, then b + 1,
    so the programs that share y's block run together; every element is still written once."""
    from kernelgraph.tools.builtin import triton_emit

    monkeypatch.setattr(triton_emit, "REUSED_PERIOD", 40)
    task = task_file(tmp_path, "x * y + y.sin()", "torch.randn(4, 40), torch.randn(40)")

    def blocks(generator):
        return {name: {**params, "BLOCK": block}
                for name, params in generator.default_config().items()}  # fmt: skip

    kernel = generate(task, tmp_path, config=blocks)
    source = kernel.read_text()
    assert "idx = (pid % 4) * 40 + pos" in source
    assert f"[(4 * triton.cdiv(40, {block}),)]" in source
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


def _small_blocks(default):
    """Blocks smaller than the rows and K, so several programs share one row or tile."""

    def smaller(self, kernel):
        config = dict(default(self, kernel))
        for key in ("BLOCK_R", "BLOCK_K"):
            if key in config:
                config[key] = 16 if key == "BLOCK_K" and "BLOCK_M" in config else 8
        if "BLOCKS" in config:
            config["BLOCKS"] = 2
        return config

    return smaller


def test_gemm_operands_are_copied_k_major_for_tensor_cores_and_verify(
    tmp_path, monkeypatch, tensor_cores
):
    """fp32 products on tensor cores want K-major operands: a row-major B or a transposed A is
    copied (a layout copy) before the kernel, and the kernel reads the copy's strides."""
    monkeypatch.setattr("kernelgraph.tools.builtin.layouts.MIN_REUSE", 1)  # these products are tiny
    forward = "(torch.relu(x @ self.w) + 1, x.t() @ self.v, torch.bmm(x.expand(2, 9, 20), self.u))"
    params = ("self.w = nn.Parameter(torch.randn(20, 12)); self.v = nn.Parameter(torch.randn(9, 5)); "
              "self.u = nn.Parameter(torch.randn(2, 20, 7))")  # fmt: skip
    task = task_file(tmp_path, forward, "torch.randn(9, 20)", params=params)
    kernel = generate(task, tmp_path)
    source = kernel.read_text()
    assert source.count(".transpose(-1, -2).contiguous().transpose(-1, -2)") == 2  # K = 20
    assert ".narrow(-1, 0, 9).copy_(self.v.transpose(-1, -2)).transpose(-1, -2)" in source  # K = 9
    assert "_a_k_major = " in source  # x.t(): M-major A
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


def test_gemm_operands_whose_lines_start_unaligned_are_copied_into_aligned_slots(
    tmp_path, monkeypatch, tensor_cores
):
    """K = 21: rows of A and columns of B start off 16-byte boundaries (no vector or TMA
    loads), so both are copied with each line in a slot of 24 floats; the K loop stops at 21.
    Allocation, a view and copy_ only: the harness's op policy passes it under strict."""
    monkeypatch.setattr("kernelgraph.tools.builtin.layouts.MIN_REUSE", 1)  # these products are tiny
    task = task_file(tmp_path, "torch.relu(x @ self.w) + 1", "torch.randn(9, 21)",
                     params="self.w = nn.Parameter(torch.randn(21, 12))")  # fmt: skip
    source = generate(task, tmp_path).read_text()
    assert source.count(".narrow(-1, 0, 21).copy_(") == 2
    assert "am[:, None] * 24 + rk[None, :] * 1" in source  # A's rows 24 apart
    assert "rk[:, None] * 1 + bn[None, :] * 24" in source  # B's columns 24 apart
    verdict = verify(task, tmp_path / "kernel.py", tmp_path)
    assert verdict.passed, verdict.message


def test_an_operand_reused_too_little_is_not_copied(tmp_path, tensor_cores):
    """A product with M = 9 reuses each element of B 9 times: the copy would cost more."""
    task = task_file(tmp_path, "x @ self.w", "torch.randn(9, 20)",
                     params="self.w = nn.Parameter(torch.randn(20, 12))")  # fmt: skip
    assert "k_major" not in generate(task, tmp_path).read_text()


SPLITS = {
    "chunk": "(lambda a, b: a * b + 1)(*(x * 2)[:, :4].chunk(2, dim=1))",
    "split_sizes": "(lambda a, b, c: a - c + b.sum(dim=2, keepdim=True))(*(x + 1).split([2, 3, 2], dim=2))",
    "unbind": "(lambda a, b, c: a * 2 + b - c)(*torch.relu(x).unbind(0))",
    "split_of_a_gemm": "(lambda q, k: q @ k.t())(*(x[0] @ self.w).split(4, dim=1))",
}  # fmt: skip


@pytest.mark.parametrize("name", list(SPLITS))
def test_every_piece_of_a_split_is_its_own_view(tmp_path, name):
    """split, chunk and unbind make several views of one tensor at different offsets: each
    piece must be read at its own (MinGPT's q, k, v from one projection all read the first)."""
    task = task_file(tmp_path, SPLITS[name], X3, params="self.w = nn.Parameter(torch.randn(7, 8))")
    verdict = verify(task, generate(task, tmp_path), tmp_path)
    assert verdict.passed, verdict.message
