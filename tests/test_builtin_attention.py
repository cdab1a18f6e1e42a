"""F.scaled_dot_product_attention as one flash-style Triton kernel (tools/builtin/attention.py):
the builtin matches PyTorch's math decomposition in the trace and writes one kernel with an
online softmax, and the real harness verifies it under the Triton interpreter. Kernels written
for the GPU (V copied keys-contiguous, GPU block sizes) run under the interpreter too."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.builtin.attention import AttentionKernel
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate

FULLY_MASKED_ROW = "self.register_buffer('m', torch.cat([torch.zeros(1, 36), torch.randn(19, 36)]))"
SHORT = "torch.randn(2, 3, 20, 16), torch.randn(2, 3, 36, 16)"
# name -> (forward, inputs, constructor body, device the kernel is written for)
CASES = {
    "plain": ("F.scaled_dot_product_attention(x, y, y)",
              "torch.randn(2, 3, 64, 16), torch.randn(2, 3, 64, 16)", "", "cpu"),
    "causal_scaled_more_keys": (
        "F.scaled_dot_product_attention(x, y, y, is_causal=True, scale=0.3)",
        "torch.randn(2, 3, 70, 16), torch.randn(2, 3, 90, 16)", "", "cuda"),
    "float_mask_broadcast_sliced_v": (
        "F.scaled_dot_product_attention(x, y, y[..., :8], attn_mask=self.m)", SHORT,
        "self.register_buffer('m', torch.randn(3, 20, 36))", "cpu"),
    "bool_mask_with_a_row_of_no_keys": (
        "F.scaled_dot_product_attention(x, y, y, attn_mask=self.m > 0)", SHORT, FULLY_MASKED_ROW,
        "cpu"),
    "two_pass_causal_3d": ("F.scaled_dot_product_attention(x, y, y, is_causal=True)",
                           "torch.randn(2, 150, 300), torch.randn(2, 170, 300)", "", "cuda"),
    "two_pass_masked": ("F.scaled_dot_product_attention(x, y, y, attn_mask=self.m > 0)",
                        "torch.randn(2, 3, 20, 300), torch.randn(2, 3, 36, 300)",
                        FULLY_MASKED_ROW, "cpu"),
}  # fmt: skip


def verify(task: Path, kernel: Path, tmp_path: Path, dsl: str = "triton", precision="fp32"):
    config = EvalConfig(dsl=dsl, device="cpu", seeds=1, profile=False, precision=precision)
    return evaluate(task, kernel, config, cache=EvalCache(tmp_path / "cache"))


def write(generator, tmp_path: Path) -> Path:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator.code())
    return kernel


@pytest.mark.parametrize("name", list(CASES))
def test_attention_is_one_kernel_that_verifies(tmp_path, name):
    forward, inputs, params, device = CASES[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    generator = builtin_generator(task, "triton", tmp_path, device=device)
    attention = [k for k in generator.program.kernels if isinstance(k, AttentionKernel)]
    assert len(attention) == 1, generator.summary()
    verdict = verify(task, write(generator, tmp_path), tmp_path)
    assert verdict.passed, verdict.message


def test_a_causal_mask_is_index_arithmetic_and_skips_blocks(tmp_path):
    forward, inputs, params, device = CASES["causal_scaled_more_keys"]
    generator = builtin_generator(task_file(tmp_path, forward, inputs), "triton", tmp_path)
    (kernel,) = generator.program.kernels
    assert kernel.causal and not kernel.mask
    assert kernel.scale == pytest.approx(0.3)
    source = generator.code()
    assert "unmasked_end" in source and "rn[None, :] <= rm[:, None]" in source


def test_large_head_dims_take_two_passes_and_small_ones_one(tmp_path):
    forward, inputs, _, _ = CASES["two_pass_causal_3d"]
    big = builtin_generator(task_file(tmp_path, forward, inputs), "triton", tmp_path)
    assert big.program.kernels[0].two_pass
    assert "_scores[" in big.code() and "_values[" in big.code()
    forward, inputs, _, _ = CASES["plain"]
    small = builtin_generator(task_file(tmp_path, forward, inputs), "triton", tmp_path)
    assert not small.program.kernels[0].two_pass and "_scores" not in small.code()


def test_gpu_fp32_kernels_copy_v_keys_contiguous(tmp_path):
    forward, inputs, _, _ = CASES["plain"]
    task = task_file(tmp_path, forward, inputs)
    code = builtin_generator(task, "triton", tmp_path, device="cuda").code()
    assert "_v_k_major = " in code
    cpu = builtin_generator(task, "triton", tmp_path, device="cpu").code()
    assert "_v_k_major" not in cpu


KERNELBENCH_STYLE = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Model(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v)


    def get_inputs():
        return [torch.rand(2, 2, 48, 40, dtype=torch.float16) for _ in range(3)]


    def get_init_inputs():
        return []
"""


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_fp16_inputs_through_math_attention_casts_are_one_kernel(tmp_path, precision):
    """KernelBench's attention problem: fp16 inputs, which math attention casts to fp32 and
    back. Under a run's precision the casts change nothing, so the chain is still one kernel."""
    task = tmp_path / "task.py"
    task.write_text(textwrap.dedent(KERNELBENCH_STYLE))
    generator = builtin_generator(task, "triton", tmp_path, precision=precision)
    assert generator.summary().startswith("1 kernel(s): attention")
    verdict = verify(task, write(generator, tmp_path), tmp_path, precision=precision)
    assert verdict.passed, verdict.message


def test_a_backend_without_attention_kernels_keeps_the_op_by_op_kernels(tmp_path):
    forward, inputs, _, _ = CASES["plain"]
    task = task_file(tmp_path, forward, inputs)
    generator = builtin_generator(task, "cpp", tmp_path)
    kernels = generator.program.kernels
    assert not any(isinstance(k, AttentionKernel) for k in kernels)
    assert {"gemm", "softmax"} <= {k.kind for k in kernels}
    verdict = verify(task, write(generator, tmp_path), tmp_path, dsl="cpp")
    assert verdict.passed, verdict.message


MIN_GPT = """
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Model(nn.Module):
        def __init__(self, n_embd=32, n_head=4, max_seqlen=48):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen))
                                 .view(1, 1, max_seqlen, max_seqlen))
            self.n_head, self.n_embd = n_head, n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)


    def get_inputs():
        return [torch.rand(2, 40, 32)]


    def get_init_inputs():
        return []
"""
# name -> (forward, inputs, constructor body, whether it is one attention kernel)
MANUAL = {
    "divided_additive_mask": (
        "torch.softmax(x @ y.transpose(-2, -1) / 4.0 + self.m, dim=-1) @ y", SHORT,
        "self.register_buffer('m', torch.randn(20, 36))", True),
    "finite_fill_with_a_row_of_no_keys": (
        "torch.softmax((x @ y.transpose(-2, -1)).masked_fill(self.m == 0, -1e9) * 0.5, dim=-1) @ y",
        SHORT, FULLY_MASKED_ROW, True),
    "weights_returned_too": (
        "(lambda a: (a @ y, a))(torch.softmax(x @ y.transpose(-2, -1), dim=-1))", SHORT, "",
        False),
    # the second product is an additive mask to the first: its own GEMM, read as a tile
    "scores_plus_another_product": (
        "torch.softmax(x @ y.transpose(-2, -1) * 0.5 + x @ y.transpose(-2, -1) * 0.5, dim=-1) @ y",
        SHORT, "", True),
    "scores_added_to_themselves": (
        "(lambda s: torch.softmax(s + s, dim=-1) @ y)(x @ y.transpose(-2, -1))", SHORT, "", False),
    "scaled_after_an_additive_mask": (
        "torch.softmax((x @ y.transpose(-2, -1) + self.m) * 0.5, dim=-1) @ y", SHORT,
        "self.register_buffer('m', torch.randn(20, 36))", False),
}  # fmt: skip


def test_hand_written_causal_attention_across_stages_is_one_kernel(tmp_path):
    """minGPT's attention (KernelBench level 3): q, k, v split from one projection, copied
    contiguous by matmul, a causal buffer through masked_fill. The copies are read through
    strides; the kernel sits between the two projections' GEMMs."""
    task = tmp_path / "task.py"
    task.write_text(textwrap.dedent(MIN_GPT))
    for device in ("cpu", "cuda"):
        generator = builtin_generator(task, "triton", tmp_path, device=device)
        kernels = generator.program.kernels
        assert sum(isinstance(k, AttentionKernel) for k in kernels) == 1, generator.summary()
        verdict = verify(task, write(generator, tmp_path), tmp_path)
        assert verdict.passed, verdict.message


@pytest.mark.parametrize("name", list(MANUAL))
def test_hand_written_attention_is_fused_only_when_it_is_exactly_one(tmp_path, name):
    forward, inputs, params, fused = MANUAL[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    generator = builtin_generator(task, "triton", tmp_path)
    kernels = generator.program.kernels
    assert any(isinstance(k, AttentionKernel) for k in kernels) == fused, generator.summary()
    verdict = verify(task, write(generator, tmp_path), tmp_path)
    assert verdict.passed, verdict.message
