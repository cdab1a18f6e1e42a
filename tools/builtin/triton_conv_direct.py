"""Convolutions without tl.dot (tools/builtin/triton_conv.py writes the rest).

Depthwise ones are direct: one output per lane, the kernel window unrolled. A forward
convolution of few taps (input channels x kernel positions a group) may add one outer product
per tap with FMAs (DOT "fma"): exact fp32, and no per-element gather arithmetic.
"""

from __future__ import annotations

from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.conv_index import coordinates, input_position
from kernelgraph.tools.builtin.triton_emit import _indent

UNROLL = 16  # depthwise kernel windows up to this long are unrolled (tl.static_range)
FMA = "fma"  # the DOT value that writes the tap-by-tap FMA form (no tl.dot)
FMA_TAPS = 256  # taps a group at most for that form: each is unrolled
ONE_STEP_TAPS = 32  # taps that one 32-deep tl.dot step covers: tf32x3 is faster there


def fma_applies(kernel: ConvKernel) -> bool:
    """Whether DOT "fma" writes this convolution: forward, few taps a group but more than one
    tl.dot step holds (level1/59, 27 taps: 1.51 ms as one tf32x3 step, 1.60 as fma), and too few
    input channels for the channel loop, whose channels-last copies (tools/builtin/layouts.py)
    it cannot use: level2/7 (8 channels) ran 10.4 ms over them, 6.2 as tf32x3 (H200). With
    those copies skipped, 8-channel problems were mixed: level2/8 (16 output channels) 4.60 ->
    2.50 ms, but level2/7, 67, 82, 87 and 90 1.7-21x slower than the channel loop."""
    taps = kernel.cin_g * kernel.kernel_numel
    few = ONE_STEP_TAPS < taps <= FMA_TAPS
    return few and not (kernel.transposed or kernel.depthwise or kernel.channel_loop)


def fma_taps(kernel: ConvKernel) -> list[str]:
    """Exact fp32 with FMAs, a tap at a time: the input at that tap for every row of the tile
    (its offset from the row's is a constant) times the weights of the tile's channels, read
    from the launch's [tap, channel] copy so that they are contiguous. A narrow 3D convolution
    (level1/54: 3 channels, 27 positions) ran 1.56 ms this way, 2.83 ms as tf32x3 tl.dot
    (H200, 128 x 32 tile, 4 warps), whose per-element gather of 81 columns cost more than the
    products."""
    dims, xs = len(kernel.kernel), kernel.x_strides
    channels = kernel.groups * kernel.cout_g
    lines, row = [], [f"nb * {xs[0]}", f"g * {kernel.cin_g * xs[1]}"]
    checks, x_offset, tap = [], [f"ci * {xs[1]}"], "ci"
    for d in range(dims):
        s, p, dil = kernel.stride[d], kernel.padding[d], kernel.dilation[d]
        lines.append(f"s{d} = o{d} * {s} - {p}")  # tap 0's input position
        row.append(f"s{d} * {xs[2 + d]}")
        last = (kernel.out_sizes[d] - 1) * s - p + (kernel.kernel[d] - 1) * dil
        checks += [f"(s{d} >= -k{d} * {dil})"] * (p > 0)
        checks += [f"(s{d} < {kernel.in_sizes[d]} - k{d} * {dil})"] * (last >= kernel.in_sizes[d])
        x_offset.append(f"k{d} * {dil * xs[2 + d]}")
        tap = f"({tap}) * {kernel.kernel[d]} + k{d}"
    lines += [f"row = {' + '.join(row)}", f"col = g * {kernel.cout_g} + rn",
              "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)"]  # fmt: skip
    inner = [
        f"a = tl.load({kernel.x} + row + ({' + '.join(x_offset)}), "
        f"mask={' & '.join(['m_ok', *checks])}, other=0.0)",
        f"b = tl.load({kernel.w} + ({tap}) * {channels} + col, mask=n_ok, other=0.0)",
        "acc += a[:, None].to(tl.float32) * b[None, :].to(tl.float32)",
    ]
    for d in reversed(range(dims)):
        inner = [f"for k{d} in tl.static_range({kernel.kernel[d]}):", *_indent(inner)]
    return [*lines, f"for ci in tl.static_range({kernel.cin_g}):", *_indent(inner)]


def direct(kernel: ConvKernel) -> list[str]:
    """Depthwise: group = channel, one output element per lane."""
    dims = len(kernel.kernel)
    xs = kernel.x_strides
    start = "tl.program_id(0).to(tl.int64)" if kernel.wide else "tl.program_id(0)"
    lines = [
        f"idx = {start} * BLOCK + tl.arange(0, BLOCK)",
        f"mask = idx < {kernel.numel}",
        f"pos = idx % {kernel.out_numel}",
        f"plane = idx // {kernel.out_numel}",
        f"c = plane % {kernel.groups}",
        f"nb = plane // {kernel.groups}",
    ]
    outs = coordinates("pos", kernel.out_sizes, "o", lines)
    lines += [
        f"x_base = nb * {xs[0]} + c * {xs[1]}",
        f"w_base = c * {kernel.w_group}",
        "acc = tl.zeros([BLOCK], tl.float32)",
    ]
    inner: list[str] = []
    checks: list[str] = []
    for d in range(dims):
        checks += input_position(kernel, d, outs[d], f"k{d}", inner)
    x_offset = " + ".join(["x_base", *(f"i{d} * {xs[2 + d]}" for d in range(dims))])
    w_offset = " + ".join(["w_base", *(f"k{d} * {kernel.w_k[d]}" for d in range(dims))])
    inner += [
        f"ok = {' & '.join(['mask', *checks])}",
        f"xv = tl.load({kernel.x} + {x_offset}, mask=ok, other=0.0)",
        f"wv = tl.load({kernel.w} + {w_offset})",
        "acc += xv.to(tl.float32) * wv.to(tl.float32)",
    ]
    for d in reversed(range(dims)):
        size = kernel.kernel[d]
        head = f"tl.static_range({size})" if kernel.kernel_numel <= UNROLL else f"range({size})"
        inner = [f"for k{d} in {head}:", *_indent(inner)]
    return lines + inner
