"""The K loop of a 1x1 convolution whose input is a depthwise convolution's output
(tools/builtin/conv_chain.py): each A tile, [rows x a block of channels], is that output,
computed from the depthwise input as the row sweep computes it (tools/builtin/
triton_conv_depthwise.py): one product, then an FMA a kernel position, in kernel-position order.
The sum then matches the unfused kernel's, and cuDNN's, to the last bit, which the TF32 rounding
before the product needs: one bit off there was a 1.2e-4 error at the output on level1/86.
"""

from __future__ import annotations

import itertools

from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.conv_index import input_position
from kernelgraph.tools.builtin.triton_emit import _indent


def depthwise_gemm(kernel: ConvKernel, dot: list[str]) -> list[str]:
    """Lines from the accumulator's zeros to its last K step; the tile's rows (o0, o1...) are
    the 1x1 convolution's output positions, which are the depthwise output's."""
    dw = kernel.depthwise_input
    assert dw is not None
    xs = dw.x_strides
    lines = [
        f"x_base = nb * {xs[0]}",
        f"w_base = rn * {kernel.w_co}",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
    ]
    step = [
        "ci = c0 + tl.arange(0, BLOCK_K)",
        f"c_ok = ci < {kernel.cin_g}",
        f"plane = x_base[:, None] + ci[None, :] * {xs[1]}",
        f"w_dw = {dw.w} + ci * {dw.w_group}",
    ]
    for tap, position in enumerate(itertools.product(*map(range, dw.kernel))):
        step += _tap(dw, tap, position)
    step += [
        f"b = tl.load({kernel.w} + w_base[None, :] + ci[:, None] * {kernel.w_ci}, "
        "mask=c_ok[:, None] & n_ok[None, :], other=0.0)",
        *dot,
    ]
    return [*lines, f"for c0 in range(0, {kernel.cin_g}, BLOCK_K):", *_indent(step)]


def _tap(dw: ConvKernel, tap: int, position: tuple[int, ...]) -> list[str]:
    """Kernel position `position`'s term of the A tile `a`: its input rows (masked in the
    padding) times each channel's weight there."""
    lines: list[str] = []
    checks, offset = ["m_ok"], []
    for d, k in enumerate(position):
        checks += input_position(dw, d, f"o{d}", str(k), lines)
        offset.append(f"i{d} * {dw.x_strides[2 + d]}")
    w_offset = sum(k * stride for k, stride in zip(position, dw.w_k, strict=True))
    row_ok = " & ".join(checks)
    lines += [
        f"v = tl.load({dw.x} + plane + ({' + '.join(offset)})[:, None], "
        f"mask=({row_ok})[:, None] & c_ok[None, :], other=0.0).to(tl.float32)",
        f"w = tl.load(w_dw + {w_offset}, mask=c_ok, other=0.0).to(tl.float32)",
        "a = v * w[None, :]" if tap == 0 else "a = tl.fma(v, w[None, :], a)",
    ]
    return lines


__all__ = ["depthwise_gemm"]
