"""Triton source, configs and launch of a convolution (tools/builtin/conv.py).

Implicit GEMM: a program computes a BLOCK_M x BLOCK_N tile of one group's [output positions x
output channels] result. Each K step gathers the A tile from the input (input channel and kernel
position from k, input position from the output position, masked where it falls in the padding
or, transposed, between strides), loads the B tile from the weights, and accumulates with
tl.dot. The output is stored in the layout torch gives it ([batch, channels, *positions]), so
the epilogue's var("idx") is the flat output index. Depthwise and few-tap (DOT "fma")
convolutions are written without tl.dot (tools/builtin/triton_conv_direct.py).
"""

from __future__ import annotations

import math
from typing import Any

from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.conv_index import coordinates, input_position
from kernelgraph.tools.builtin.depthwise_columns import columns
from kernelgraph.tools.builtin.kernels import next_pow2
from kernelgraph.tools.builtin.printer import Printer
from kernelgraph.tools.builtin.tf32_copies import ROUNDINGS, channels_last_copy, rounded_copy
from kernelgraph.tools.builtin.tile_offsets import Digit, TileOffsets
from kernelgraph.tools.builtin.triton_conv_depthwise import depthwise_rows, rolling, rows_of
from kernelgraph.tools.builtin.triton_conv_depthwise import grid as rows_grid
from kernelgraph.tools.builtin.triton_conv_direct import FMA, direct, fma_taps
from kernelgraph.tools.builtin.triton_emit import TritonSyntax, _indent, _signature

INTERPRETER_BLOCK = 1 << 16
NARROW_CHANNELS = 8  # input channels per group at or below which cuDNN was seen to skip TF32


def conv_source(
    kernel: ConvKernel, gpu: bool, input_precision: str | None, config: dict[str, Any]
) -> str:
    offsets = None if kernel.depthwise else _tile_offsets(kernel).spell  # direct: 1-D tiles
    printer = Printer(TritonSyntax(gpu), prefix="e", offsets=offsets)
    stores = []
    for store in kernel.stores:
        value = printer.value(store.value)
        stores += printer.take() + [f"tl.store({store.arg} + idx, {value}, mask=mask)"]
    if kernel.rows_sweep:  # the stores run once per output row, inside the sweep
        body = depthwise_rows(kernel, stores)
    elif kernel.depthwise:
        body = direct(kernel) + stores
    elif config.get("DOT") == FMA:
        body = _tile(kernel) + fma_taps(kernel) + _tile_output(kernel) + stores
    else:
        gemm = _channel_gemm if kernel.channel_loop else _flat_gemm
        ahead = ("b", "a") if kernel.x_channels_last else ("b",)
        dot = _dot(input_precision, ahead if _rounding(config) else ())
        body = _tile(kernel) + gemm(kernel, dot) + _tile_output(kernel) + stores
    if kernel.rows_sweep:
        constexprs = ["BLOCK_W", "ROWS"]
    elif kernel.depthwise:
        constexprs = ["BLOCK"]
    else:
        constexprs = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]
        constexprs += ["DOT"] if input_precision == "DOT" else []
    return "\n".join([_signature(kernel, constexprs), *_indent(body)])


def _tile(kernel: ConvKernel) -> list[str]:
    """The program's tile (grouped ordering), and the output position o0, o1... of each row.
    A transposed convolution's stride phases are the fastest grid index: the programs that
    write one region's interleaved outputs run together, so its cache lines fill in L2."""
    wide = ".to(tl.int64)" if kernel.wide else ""
    phased = kernel.phases > 1
    lines = [
        f"pid = tl.program_id(0) // {kernel.phases}" if phased else "pid = tl.program_id(0)",
        "g = tl.program_id(1)",
        f"num_m = tl.cdiv({kernel.phase_m}, BLOCK_M)",
        f"num_n = tl.cdiv({kernel.cout_g}, BLOCK_N)",
        "per_group = GROUP_M * num_n",
        "first_m = (pid // per_group) * GROUP_M",
        "size_m = min(num_m - first_m, GROUP_M)",
        "pid_m = first_m + (pid % per_group) % size_m",
        "pid_n = (pid % per_group) // size_m",
        f"rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)){wide}",
        "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        f"m_ok = rm < {kernel.phase_m}",
        f"n_ok = rn < {kernel.cout_g}",
        "# batch nb, then the spatial coordinates of each row",
        f"nb = rm // {math.prod(kernel.phase_sizes)}",
    ]
    if kernel.phases == 1:
        lines.append(f"pos = rm % {kernel.out_numel}")
        coordinates("pos", kernel.out_sizes, "o", lines)
        return lines
    # rows of one stride phase r: output position o = q * stride + r along each dim
    lines.append(f"qpos = rm % {math.prod(kernel.phase_sizes)}")
    coordinates("qpos", kernel.phase_sizes, "q", lines)
    strides = kernel.phase_strides
    coordinates(f"tl.program_id(0) % {kernel.phases}", strides, "r", lines)
    for d, (s, size) in enumerate(zip(strides, kernel.out_sizes, strict=True)):
        lines.append(f"o{d} = q{d} * {s} + r{d}" if s > 1 else f"o{d} = q{d}")
        if size % s:
            lines.append(f"m_ok = m_ok & (o{d} < {size})")
    flat = "o0"
    for d in range(1, len(kernel.out_sizes)):
        flat = f"({flat}) * {kernel.out_sizes[d]} + o{d}"
    return [*lines, f"pos = {flat}"]


def _tile_output(kernel: ConvKernel) -> list[str]:
    channels = kernel.groups * kernel.cout_g
    return [
        f"co = g * {kernel.cout_g} + rn",
        f"idx = (nb[:, None] * {channels} + co[None, :]) * {kernel.out_numel} + pos[:, None]",
        "mask = m_ok[:, None] & n_ok[None, :]",
    ]


def _tile_offsets(kernel: ConvKernel) -> TileOffsets:
    """idx's digits (_tile_output): batch, output channel, output position."""
    digits = (
        Digit("nb[:, None]", kernel.batch, "row"),
        Digit("co[None, :]", kernel.groups * kernel.cout_g, "col"),
        Digit("pos[:, None]", kernel.out_numel, "row"),
    )
    return TileOffsets(digits, row_mask="m_ok[:, None]", col_mask="n_ok[None, :]")


def _rounding(config: dict[str, Any]) -> str | None:
    """The DOT value (tf32rn, tf32rna) whose rounding the launch applies to the weights (and the
    input it copies channels-last) once, not every program every K step; with B straight from
    memory the loop ran 1.1-1.3x faster (H200, level-1 convs). None: DOT rounds nothing."""
    dot = config.get("DOT")
    return dot if dot in ROUNDINGS else None


def _dot(input_precision: str | None, rounded: tuple[str, ...]) -> list[str]:
    """`rounded`: the operands (a, b) the launch rounded to TF32 ahead under tf32rn/tf32rna."""
    if input_precision != "DOT":
        precision = f", input_precision={input_precision}" if input_precision else ""
        return [f"acc = tl.dot(a, b, acc{precision})"]
    lines = []
    for dot, rounding in ROUNDINGS.items():  # cuDNN's TF32: operands rounded, one TF32 product
        lines.append(f'{"elif" if lines else "if"} DOT == "{dot}":')
        lines += [f"    {x} = {rounding.format(x=x)}" for x in ("a", "b") if x not in rounded]
        lines.append('    acc = tl.dot(a, b, acc, input_precision="tf32")')
    return [*lines, "else:", "    acc = tl.dot(a, b, acc, input_precision=DOT)"]


def _flat_gemm(kernel: ConvKernel, dot: list[str]) -> list[str]:
    """K = (input channel, kernel position) flattened: few input channels per group. A stride
    phase's K holds only its taps (`_phase_taps`)."""
    dims = len(kernel.kernel)
    xs = kernel.x_strides
    taps = kernel.taps
    lines = [
        f"x_base = nb * {xs[0]} + g * {kernel.cin_g * xs[1]}",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        f"for kk in range(0, tl.cdiv({kernel.flat_k}, BLOCK_K)):",
    ]
    step = [
        "rk = kk * BLOCK_K + tl.arange(0, BLOCK_K)",
        f"k_ok = rk < {kernel.flat_k}",
        "# input channel ci and kernel position k0, k1... of each column",
        f"ci = rk // {math.prod(taps)}",
        f"kpos = rk % {math.prod(taps)}",
    ]
    a_offset, checks = ["x_base[:, None]", f"ci[None, :] * {xs[1]}"], []
    if kernel.phases > 1:
        ks = _phase_taps(kernel, coordinates("kpos", taps, "j", step), step)
        for d in range(dims):
            step.append(f"i{d} = q{d}[:, None] + dq{d}[None, :]")
            checks += [f"(i{d} >= 0)", f"(i{d} < {kernel.in_sizes[d]})"]
            a_offset.append(f"i{d} * {xs[2 + d]}")
    else:
        ks = coordinates("kpos", kernel.kernel, "k", step)
    for d in range(dims if kernel.phases == 1 else 0):
        checks += input_position(kernel, d, f"o{d}[:, None]", f"{ks[d]}[None, :]", step)
        a_offset.append(f"i{d} * {xs[2 + d]}")
    b_offset = [f"g * {kernel.w_group}", f"rn[None, :] * {kernel.w_co}",
                f"ci[:, None] * {kernel.w_ci}"]  # fmt: skip
    b_offset += [f"{ks[d]}[:, None] * {kernel.w_k[d]}" for d in range(dims)]
    step += [
        f"a_ok = {' & '.join(['m_ok[:, None] & k_ok[None, :]', *checks])}",
        f"a = tl.load({kernel.x} + {' + '.join(a_offset)}, mask=a_ok, other=0.0)",
        f"b = tl.load({kernel.w} + {' + '.join(b_offset)}, "
        "mask=k_ok[:, None] & n_ok[None, :], other=0.0)",
        *dot,
    ]
    return lines + _indent(step)


def _phase_taps(kernel: ConvKernel, js: list[str], lines: list[str]) -> list[str]:
    """Kernel position k{d} of tap j{d} for phase r{d} (dilation 1): the first position that
    reaches the phase is (r + padding) % stride, then every stride-th. Columns past the kernel
    are masked in k_ok; dq{d} is the input offset from q{d}, (r + padding - k) / stride, exact."""
    for d, j in enumerate(js):
        s, p = kernel.stride[d], kernel.padding[d]
        lines.append(f"k{d} = (r{d} + {p}) % {s} + {j} * {s}")
        lines.append(f"dq{d} = (r{d} + {p} - k{d}) // {s}")
        if kernel.kernel[d] % s:
            lines.append(f"k_ok = k_ok & (k{d} < {kernel.kernel[d]})")
    return [f"k{d}" for d in range(len(js))]


def _channel_gemm(kernel: ConvKernel, dot: list[str]) -> list[str]:
    """K loop over kernel positions, then blocks of input channels: each row's input position
    and padding test once per kernel position; a stride phase skips the positions that miss it."""
    dims = len(kernel.kernel)
    xs = kernel.x_strides
    lines = [
        f"x_base = nb * {xs[0]} + g * {kernel.cin_g * xs[1]}",
        f"w_base = g * {kernel.w_group} + rn * {kernel.w_co}",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
    ]
    position: list[str] = []
    ks = coordinates("kpos", kernel.kernel, "k", position)
    checks, row, reach = [], ["x_base"], []
    for d in range(dims):
        if kernel.phases > 1 and kernel.phase_strides[d] == kernel.stride[d]:
            checks += _phase_position(kernel, d, ks[d], position, reach)
        else:
            checks += input_position(kernel, d, f"o{d}", ks[d], position)
        row.append(f"i{d} * {xs[2 + d]}")
    w_k = " + ".join(["w_base", *(f"{ks[d]} * {kernel.w_k[d]}" for d in range(dims))])
    position += [
        f"row_ok = {' & '.join(['m_ok', *checks])}",
        f"row = {' + '.join(row)}",
        f"w_k = {w_k}",
    ]
    step = [
        "ci = c0 + tl.arange(0, BLOCK_K)",
        f"c_ok = ci < {kernel.cin_g}",
        f"a = tl.load({kernel.x} + row[:, None] + ci[None, :] * {xs[1]}, "
        "mask=row_ok[:, None] & c_ok[None, :], other=0.0)",
        f"b = tl.load({kernel.w} + w_k[None, :] + ci[:, None] * {kernel.w_ci}, "
        "mask=c_ok[:, None] & n_ok[None, :], other=0.0)",
        *dot,
    ]
    if reach:  # this kernel position reaches the phase's outputs only where the stride divides
        channels = [f"for c0 in range(0, {kernel.cin_g}, BLOCK_K):", *_indent(step)]
        body = position + [f"if {' & '.join(reach)}:", *_indent(channels)]
        return [*lines, f"for kpos in range({kernel.kernel_numel}):", *_indent(body)]
    if kernel.kernel_numel == 1:  # the position's lines hoisted: its row offsets keep their
        # alignment (flattened, a 1x1 convolution lost its vector loads: level1/87 5.87 ms, 4.59
        # with this loop, H100)
        loop = f"for c0 in range(0, {kernel.cin_g}, BLOCK_K):"
        return [*lines, "kpos = 0", *position, loop, *_indent(step)]
    # one loop over (kernel position, channel block): Triton pipelines only an innermost loop,
    # and a channel loop of one or two blocks would leave every load's latency exposed
    blocks = f"(({kernel.cin_g} + BLOCK_K - 1) // BLOCK_K)"
    head = [f"kpos = kc // {blocks}", f"c0 = (kc % {blocks}) * BLOCK_K"]
    if not kernel.x_channels_last:  # a channel block's kernel positions in turn: their input
        # lines overlap, so the later ones hit L1 (level1/76: 8.00 -> 6.87 ms, H100)
        taps = kernel.kernel_numel
        head = [f"kpos = kc % {taps}", f"c0 = (kc // {taps}) * BLOCK_K"]
    return [*lines, f"for kc in range({kernel.kernel_numel} * {blocks}):",
            *_indent(head + position + step)]  # fmt: skip


def _phase_position(
    kernel: ConvKernel, d: int, k: str, lines: list[str], reach: list[str]
) -> list[str]:
    """A transposed convolution's input position along d for the rows of phase r{d}: kernel
    position k reaches output q * s + r from input q + t / s, where t = r + p - k * dil is a
    multiple of s (the scalar test appended to `reach`)."""
    s, p, dil = kernel.stride[d], kernel.padding[d], kernel.dilation[d]
    lines.append(f"t{d} = r{d} + {p} - {k} * {dil}")
    if s > 1:
        reach.append(f"(t{d} % {s} == 0)")
        lines.append(f"i{d} = q{d} + t{d} // {s}")
    else:
        lines.append(f"i{d} = q{d} + t{d}")
    return [f"(i{d} >= 0)", f"(i{d} < {kernel.in_sizes[d]})"]


def cudnn_roundings(kernel: ConvKernel) -> tuple[str, str]:
    """The two TF32 roundings (DOT values), the one cuDNN likely applies first.

    On the H200, the first convolution of 98 KernelBench problems matched operands rounded ties
    away from zero for forward convolutions with a kernel wider than 1x1 (20 of the 22 that ran
    in TF32; two 3x3 ones with 64 output channels rounded ties to even), ties to even for
    transposed ones (42 of 44) and the 1x1 one (cuBLAS's GEMM) (benchmarks/RESULTS.md). The
    other rounding is the next candidate's."""
    if kernel.transposed or kernel.kernel_numel == 1:
        return ("tf32rn", "tf32rna")
    return ("tf32rna", "tf32rn")


def cudnn_skips_tf32(kernel: ConvKernel) -> bool:
    """Whether cuDNN, under PyTorch's default flags, likely runs this convolution without TF32.

    On the H100, every stride-1 forward convolution of KernelBench with at most 8 input channels
    per group missed the TF32 reference with tf32rn and matched it with tf32x3 (15 problems),
    while the strided 3-channel one (level 1's 11x11, stride 4) matched tf32rn (RESULTS.md).
    Transposed ones rounded ties to even at any stride when ungrouped, even with 3 input
    channels (level 2's 3D ones), but the grouped ones of 8 channels a group (level1/72, 75)
    were exact on the H200 and missed tf32rn by 2.2e-4 on the H100."""
    narrow = kernel.cin_g <= NARROW_CHANNELS and not kernel.depthwise
    if kernel.transposed:
        return narrow and kernel.groups > 1
    return narrow and all(s == 1 for s in kernel.stride)


def default(kernel: ConvKernel, gpu: bool, dots: tuple[str, ...]) -> dict[str, Any]:
    """`dots`: the first DOT value to try, or none when DOT is not tuned."""
    if kernel.rows_sweep:
        return _rows_default(kernel, gpu)
    if kernel.depthwise:
        if not gpu:
            return {"BLOCK": min(next_pow2(kernel.numel), INTERPRETER_BLOCK), "num_warps": 1}
        return {"BLOCK": 256, "num_warps": 4}
    precision = {"DOT": dots[0]} if dots else {}
    k = kernel.cin_g if kernel.channel_loop else kernel.flat_k  # the K loop's length
    if not gpu:  # the interpreter: fewest program instances
        return {"BLOCK_M": min(next_pow2(kernel.phase_m), 64), "BLOCK_N": max(16, min(next_pow2(kernel.cout_g), 64)),
                "BLOCK_K": max(16, min(next_pow2(k), 64)), "GROUP_M": 8, **precision,
                "num_warps": 1, "num_stages": 1}  # fmt: skip
    # three products per step: level1/54 (flat K = 81) ran 2.83 ms at 16-deep blocks, 4.35 at
    # 32 (H200); the tf32rn level1/50 was 1.36 at 32, 1.41 at 16; a K that one 32-deep step
    # covers stays one step (level1/59, K = 27: 1.63 ms at 32, 2.84 at 16, H100)
    # (fma has no K blocks: its depth is for tf32x3, the DOT tried after it)
    three = precision.get("DOT") in ("tf32x3", FMA) and not kernel.channel_loop
    deep = 16 if three and k > 32 else 32
    in_place = kernel.channel_loop and not kernel.x_channels_last and kernel.kernel_numel > 1
    if in_place:
        deep = 16  # input lines read in place, taps in turn: level1/76 6.87 ms at 16, 8.16 at 32
    # fma: level1/54 ran 1.56 ms at 128 x 32 x 4 warps, 1.81 at 128 x 64 (H200)
    wide, warps = (32, 4) if precision.get("DOT") == FMA else (128, 8)
    # whole lines stored: level1/81 0.410 -> 0.372 ms at 4, 79 0.716 -> 0.636; lines read in
    # place: 64 2.71-2.98 -> 2.62-2.65, 67 1.81-1.85 -> 1.71, 74 1.01 -> 0.93, 75 1.14 -> 0.99
    # (H100)
    if kernel.inner_unphased or in_place:
        warps = 4
    return {"BLOCK_M": 128, "BLOCK_N": max(16, min(next_pow2(kernel.cout_g), wide)),
            "BLOCK_K": max(16, min(next_pow2(k), deep)), "GROUP_M": 8, **precision,
            "num_warps": warps, "num_stages": 3}  # fmt: skip


def _rows_default(kernel: ConvKernel, gpu: bool) -> dict[str, Any]:
    """A row sweep's tile. ROWS: a chunk re-reads kernel rows - 1 input rows above it when the
    rows roll, none otherwise."""
    lanes = columns(kernel).lanes
    width = max(next_pow2(kernel.out_sizes[-1]), lanes)
    rows = rows_of(kernel)
    if not gpu:  # the interpreter: few program instances
        return {"BLOCK_W": min(width, 1024), "ROWS": min(rows, 64), "num_warps": 1}
    # a row in one tile where it fits 512: level1/84 (510 wide) ran 3.05 ms at 512, 3.28 at
    # 256; level1/85 (250 wide) 0.443 at 256, 0.625 at 512 (H100, a load a tap, 4 warps)
    chunk = 32 if rolling(kernel) else 8
    width = min(width, 512)
    # groups: one a thread (level1/85: 0.388 ms at 256 wide x 2 warps, 0.404 at 128 x 1)
    warps = max(1, width // (32 * lanes)) if lanes > 1 else 4
    return {"BLOCK_W": width, "ROWS": min(next_pow2(rows), chunk), "num_warps": warps}


def tunables(kernel: ConvKernel, gpu: bool, dots: tuple[str, ...]) -> dict[str, list[Any]]:
    if not gpu:
        return {}
    if kernel.rows_sweep:
        rows = [8, 16, 32, 64] if rows_of(kernel) > 1 else [1]
        return {"BLOCK_W": [64, 128, 256, 512], "ROWS": rows, "num_warps": [2, 4, 8]}
    if kernel.depthwise:
        return {"BLOCK": [128, 256, 512, 1024], "num_warps": [2, 4, 8]}
    return {**({"DOT": list(dots)} if dots else {}), "BLOCK_M": [64, 128],
            "BLOCK_N": [32, 64, 128], "BLOCK_K": [16, 32, 64], "num_warps": [4, 8],
            "num_stages": [2, 3, 4]}  # fmt: skip


def launch(kernel: ConvKernel, args: list[str], config: dict[str, Any]) -> list[str]:
    lines, args, rounding = [], list(args), _rounding(config)
    if kernel.x_channels_last:
        slot, copy = kernel.inputs.index(kernel.x), f"{kernel.name}_x_channels_last"
        channels, positions = kernel.groups * kernel.cin_g, math.prod(kernel.in_sizes)
        lines += channels_last_copy(args[slot], copy, kernel.batch, channels, positions, rounding)
        args[slot] = copy
    if rounding:
        slot, copy = kernel.inputs.index(kernel.w), f"{kernel.name}_w_tf32"
        lines += rounded_copy(args[slot], copy, rounding)
        args[slot] = copy
    if config.get("DOT") == FMA:  # [tap, channel]: a tap's weights contiguous (a layout copy)
        slot, copy = kernel.inputs.index(kernel.w), f"{kernel.name}_w_taps"
        channels = kernel.groups * kernel.cout_g
        lines.append(f"{copy} = {args[slot]}.reshape({channels}, -1).t().contiguous()")
        args[slot] = copy
    if kernel.rows_sweep:
        grid = rows_grid(kernel, config["BLOCK_W"], config["ROWS"])
    elif kernel.depthwise:
        grid = f"(triton.cdiv({kernel.numel}, {config['BLOCK']}),)"
    else:
        grid = (f"(triton.cdiv({kernel.phase_m}, {config['BLOCK_M']}) * "
                f"triton.cdiv({kernel.cout_g}, {config['BLOCK_N']}) * {kernel.phases}, {kernel.groups})")  # fmt: skip
    options = ", ".join(f"{k}={v!r}" for k, v in config.items())
    return [*lines, f"{kernel.name}[{grid}]({', '.join(args)}, {options})"]
