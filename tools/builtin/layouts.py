"""GEMM operands copied into a K-major layout before the kernel runs.

Tensor cores take fp32 products (tf32x3, tf32) only from K-major operands: A with its K
elements contiguous, B ([K, N]) with its K elements contiguous, as nn.Linear's weight is. An
operand in the other layout (`x @ y` with row-major y, `x.t() @ y`) makes Triton's tf32x3 GEMM
slower than IEEE FMAs (H100, KernelBench level 1), so such an operand is first copied into the
K-major layout: a layout copy (`contiguous`), which moves memory and computes nothing, once per
forward and cheap next to the product when the product reuses each copied element often: the
copy of B costs 8 bytes per element against 2M FLOPs, so it is made only where the other side
(M for B, N for A) is at least MIN_REUSE long. With M = 256 and K = 524288
(level1/6_Matmul_with_large_K_dimension_) the copy made the GEMM 3x slower. An operand already
K-major whose lines do not start 16-byte aligned (K not a multiple of 4 floats) is copied too,
each line into a slot of the next multiple of 4 floats; the K loop still stops at K.

A convolution whose K loop runs over input-channel blocks (ConvKernel.channel_loop) reads its
weights as [group, *k, cout_g, cin_g] (the input channels, its K, contiguous: each weight element
is reused by every output position), and its input channels-last ([n, *positions, c]) where
each input element is reused often enough (`conv_reuse`) to pay for the copy.

Attention's second product (weights @ v) has the keys as its K: v is copied keys-contiguous
when ATTENTION_V_COPY is on (q and k^T are K-major as SDPA's inputs come).
"""

from __future__ import annotations

import math
from dataclasses import replace

from kernelgraph.tools.builtin.attention import AttentionKernel, Operand3
from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.expr import loads
from kernelgraph.tools.builtin.kernels import GemmKernel, Operand
from kernelgraph.tools.builtin.program import Program, Step

MIN_REUSE = 512  # bmm [128, 512, 1024] @ [.., 1024, 2048] (M = 512): 7.64 -> 5.25 ms with the copy
# fp32 elements in 16 bytes: K-major lines (rows of A, columns of B) that do not start on a
# 16-byte boundary (K = 2949) cannot be vector or TMA loads, so they are copied padded
ALIGN = 4
# uses of each input element (conv_reuse) that pay for the copies: with 128
# (level1/87_conv_pointwise_2D, a 4 GiB input) they made the convolution 1.9x slower
MIN_CONV_REUSE = 256
# convolutions of at most this many spatial dims read their input in place at any reuse: a
# channel block's taps run in turn over the same input lines, which L1 serves (H100, in place
# against copied: level1/67 1.88 against 2.17 ms, 64 2.88 against 3.71, 74 1.01 against 1.08;
# the 2d level1/71 1.32 against 1.11)
IN_PLACE_DIMS = 1
ATTENTION_V_COPY = True


def k_major_operands(program: Program) -> Program:
    steps: list[Step] = []
    for step in program.steps:
        kernel = step.kernel
        if isinstance(kernel, GemmKernel):
            step = _relaid(step, kernel, steps)
        elif isinstance(kernel, ConvKernel) and kernel.channel_loop:
            step = _relaid_conv(step, kernel, steps)
        elif isinstance(kernel, AttentionKernel) and ATTENTION_V_COPY and kernel.v.row != 1:
            step = _relaid_attention(step, kernel, steps)
        steps.append(step)
    return replace(program, steps=steps)


def _k_lines(source: str, k: int, padded_k: int) -> str:
    """An expression for `source` ([.., lines, K]) copied contiguous, each line in a slot of
    `padded_k` elements so that every line starts 16-byte aligned (a layout copy: allocation,
    a view and `copy_`; the padding is never read, the K loop's mask stops at K)."""
    if padded_k == k:
        return f"{source}.contiguous()"
    slots = f"{source}.new_empty((*{source}.shape[:-1], {padded_k}))"
    return f"{slots}.narrow(-1, 0, {k}).copy_({source})"


def _relaid(step: Step, kernel: GemmKernel, steps: list[Step]) -> Step:
    read_by_epilogue = {ld.tensor for s in kernel.stores for ld in loads(s.value)}
    inputs, a, b = list(step.inputs), kernel.a, kernel.b
    sides = ((a, kernel.m, kernel.k, 2, kernel.n), (b, kernel.k, kernel.n, 1, kernel.m))
    padded_k = -(-kernel.k // ALIGN) * ALIGN
    for operand, rows, cols, k_stride, reuse in sides:
        aligned = operand.strides[3 - k_stride] % ALIGN == 0  # each M (or N) line's start
        if operand.strides[k_stride] == 1 and aligned:
            continue
        if operand.arg in read_by_epilogue or reuse < MIN_REUSE:
            continue
        slot = kernel.inputs.index(operand.arg)
        role = "a" if operand is a else "b"
        source, copy = inputs[slot], f"{kernel.name}_{role}_k_major"
        lines = rows if operand is a else cols  # M for A, N for B
        batch = lines * padded_k if operand.strides[0] else 0
        if operand is a:  # [.., M, K] row-major
            text, strides = _k_lines(source, kernel.k, padded_k), (batch, padded_k, 1)
        else:  # [.., K, N] with K contiguous
            lines_k = _k_lines(f"{source}.transpose(-1, -2)", kernel.k, padded_k)
            text, strides = f"{lines_k}.transpose(-1, -2)", (batch, 1, padded_k)
        steps.append(Step("layout", [copy], args=text))
        inputs[slot] = copy
        if operand is a:
            a = Operand(operand.arg, strides)
        else:
            b = Operand(operand.arg, strides)
    if a is kernel.a and b is kernel.b:
        return step
    return replace(step, kernel=replace(kernel, a=a, b=b), inputs=inputs)


def conv_reuse(kernel: ConvKernel) -> float:
    """How many times the convolution reads each input element: once per output channel of its
    group and kernel position, over the stride for a forward one (each output position moves
    `stride` inputs along). level1/76 (1d, stride 3, 128 output channels, 3 taps: 128 uses, not
    384) ran 9.39 ms without the copies, 11.57 with them (H100), its 8.6 GB input copied for
    reads that touch each element once per tile."""
    uses = kernel.cout_g * kernel.kernel_numel
    return uses if kernel.transposed else uses / math.prod(kernel.stride)


def _relaid_conv(step: Step, kernel: ConvKernel, steps: list[Step]) -> Step:
    """Weights as [group, *k, cout_g, cin_g] (input channels contiguous: vector loads of B),
    and the input channels-last when it is reused enough to pay for its copy."""
    read_by_epilogue = {ld.tensor for s in kernel.stores for ld in loads(s.value)}
    copy_x = len(kernel.kernel) > IN_PLACE_DIMS and conv_reuse(kernel) >= MIN_CONV_REUSE
    if {kernel.x, kernel.w} & read_by_epilogue or not (copy_x or kernel.w_ci != 1):
        return step
    inputs = list(step.inputs)
    w_slot = kernel.inputs.index(kernel.w)
    dims, g = len(kernel.kernel), kernel.groups
    w_copy = f"{kernel.name}_w_k_major"
    # weights [g * a, b, *k] (a, b: cout_g, cin_g, or cin_g, cout_g when transposed) to
    # [g, *k, cout_g, cin_g]
    inner = (kernel.cin_g, kernel.cout_g) if kernel.transposed else (kernel.cout_g, kernel.cin_g)
    order = (2, 1) if kernel.transposed else (1, 2)
    permute = ", ".join(map(str, [0, *range(3, 3 + dims), *order]))
    w_text = f"{inputs[w_slot]}.unflatten(0, ({g}, {inner[0]})).permute({permute}).contiguous()"
    pair = kernel.cout_g * kernel.cin_g
    w_k = [pair * math.prod(kernel.kernel[d + 1 :]) for d in range(dims)]
    steps.append(Step("layout", [w_copy], args=w_text))
    inputs[w_slot] = w_copy
    relaid = replace(kernel, w_group=pair * kernel.kernel_numel, w_co=kernel.cin_g, w_ci=1,
                     w_k=w_k)  # fmt: skip
    if copy_x:  # the input's copy is the launch's: under tf32rn it rounds while it copies
        cin = g * kernel.cin_g
        x_strides = [cin * math.prod(kernel.in_sizes), 1]
        x_strides += [cin * math.prod(kernel.in_sizes[d + 1 :]) for d in range(dims)]
        relaid = replace(relaid, x_strides=x_strides, x_channels_last=True)
    return replace(step, kernel=relaid, inputs=inputs)


def _relaid_attention(step: Step, kernel: AttentionKernel, steps: list[Step]) -> Step:
    inputs = list(step.inputs)
    slot = kernel.inputs.index(kernel.v.arg)
    copy = f"{kernel.name}_v_k_major"
    steps.append(Step("layout", [copy],
                      args=f"{inputs[slot]}.transpose(-1, -2).contiguous().transpose(-1, -2)"))  # fmt: skip
    inputs[slot] = copy
    # the copy is contiguous over [.., dv, keys] (broadcast batch dims become real ones)
    batch, inner = [], kernel.keys * kernel.dv
    for size, _ in reversed(kernel.v.batch):
        batch.insert(0, (size, inner))
        inner *= size
    v = Operand3(kernel.v.arg, batch, 1, kernel.keys)
    return replace(step, kernel=replace(kernel, v=v), inputs=inputs)
