"""GEMM operands copied into a K-major layout before the kernel runs.

Tensor cores take fp32 products (tf32x3, tf32) only from K-major operands: A with its K
elements contiguous, B ([K, N]) with its K elements contiguous, as nn.Linear's weight is. An
operand in the other layout (`x @ y` with row-major y, `x.t() @ y`) makes Triton's tf32x3 GEMM
slower than IEEE FMAs (H100, KernelBench level 1), so such an operand is first copied into the
K-major layout: a layout copy (`contiguous`), which moves memory and computes nothing, once per
forward and cheap next to the product when the product reuses each copied element often: the
copy of B costs 8 bytes per element against 2M FLOPs, so it is made only where the other side
(M for B, N for A) is at least MIN_REUSE long. With M = 256 and K = 524288
(level1/6_Matmul_with_large_K_dimension_) the copy made the GEMM 3x slower.
"""

from __future__ import annotations

from dataclasses import replace

from tools.builtin.expr import loads
from tools.builtin.kernels import GemmKernel, Operand
from tools.builtin.program import Program, Step

MIN_REUSE = 1024


def k_major_operands(program: Program) -> Program:
    steps: list[Step] = []
    for step in program.steps:
        kernel = step.kernel
        if isinstance(kernel, GemmKernel):
            step = _relaid(step, kernel, steps)
        steps.append(step)
    return replace(program, steps=steps)


def _relaid(step: Step, kernel: GemmKernel, steps: list[Step]) -> Step:
    read_by_epilogue = {ld.tensor for s in kernel.stores for ld in loads(s.value)}
    inputs, a, b = list(step.inputs), kernel.a, kernel.b
    sides = ((a, kernel.m, kernel.k, 2, kernel.n), (b, kernel.k, kernel.n, 1, kernel.m))
    for operand, rows, cols, k_stride, reuse in sides:
        if operand.strides[k_stride] == 1 or operand.arg in read_by_epilogue or reuse < MIN_REUSE:
            continue
        slot = kernel.inputs.index(operand.arg)
        role = "a" if operand is a else "b"
        source, copy = inputs[slot], f"{kernel.name}_{role}_k_major"
        batch = rows * cols if operand.strides[0] else 0
        if operand is a:  # [.., M, K] row-major
            text, strides = f"{source}.contiguous()", (batch, cols, 1)
        else:  # [.., K, N] with K contiguous
            text, strides = (
                f"{source}.transpose(-1, -2).contiguous().transpose(-1, -2)",
                (batch, 1, rows),
            )
        steps.append(Step("layout", [copy], args=text))
        inputs[slot] = copy
        if operand is a:
            a = Operand(operand.arg, strides)
        else:
            b = Operand(operand.arg, strides)
    if a is kernel.a and b is kernel.b:
        return step
    return replace(step, kernel=replace(kernel, a=a, b=b), inputs=inputs)
