"""Forward depthwise convolutions as row sweeps (tools/builtin/triton_conv.py prints the rest).

A program owns BLOCK_W output columns of ROWS consecutive output rows of one plane (a batch
index, a channel and any outer spatial position). Walking down its rows with stride 1, it loads
each input row once per kernel column and adds it into the partial sums of every output row
that row reaches (one per kernel row), so a 3 x 7 window costs 7 loads an output, not 21, and a
tap's address is a constant offset from the row's. The flat kernel (one output per lane, its
window's positions computed per element: triton_conv_direct.direct) reached 31% of
speed-of-light on level1/85 (3 x 7) and 64% on level1/84 (3 x 3). Rows strided or dilated
cannot share loads that way: there each output row reads its whole window (cached in L1).
How a row's columns are read (a load a tap, or aligned groups of four) is
tools/builtin/depthwise_columns.py.
"""

from __future__ import annotations

import itertools
import math

from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.conv_index import coordinates
from kernelgraph.tools.builtin.depthwise_columns import TapColumns, columns
from kernelgraph.tools.builtin.triton_emit import _indent


def rolling(kernel: ConvKernel) -> bool:
    """Whether consecutive output rows share input rows: stride 1 and dilation 1 down the rows
    (a 1-d convolution has one row)."""
    dims = len(kernel.kernel)
    return dims == 1 or (kernel.stride[-2] == 1 and kernel.dilation[-2] == 1)


def rows_of(kernel: ConvKernel) -> int:
    """Output rows of a plane: the second-to-last spatial size (1 for a 1-d convolution)."""
    return kernel.out_sizes[-2] if len(kernel.kernel) > 1 else 1


def planes(kernel: ConvKernel) -> int:
    """Batch x channels x the outer spatial positions (a 3-d convolution's depth)."""
    return kernel.batch * kernel.groups * math.prod(kernel.out_sizes[:-2])


def grid(kernel: ConvKernel, block_w: int, rows: int) -> str:
    columns = f"triton.cdiv({kernel.out_sizes[-1]}, {block_w})"
    return f"({columns} * triton.cdiv({rows_of(kernel)}, {rows}) * {planes(kernel)},)"


def depthwise_rows(kernel: ConvKernel, stores: list[str]) -> list[str]:
    """The kernel body; `stores` (the epilogue and its tl.store lines over acc, idx and mask)
    run once per output row."""
    dims, xs = len(kernel.kernel), kernel.x_strides
    out_w, out_h = kernel.out_sizes[-1], rows_of(kernel)
    wide = ".to(tl.int64)" if kernel.wide else ""
    lines = [
        "pid = tl.program_id(0)",
        f"pw = pid % tl.cdiv({out_w}, BLOCK_W)",
        f"rest = pid // tl.cdiv({out_w}, BLOCK_W)",
        f"oh0 = (rest % tl.cdiv({out_h}, ROWS)) * ROWS",
        f"plane = (rest // tl.cdiv({out_h}, ROWS)){wide}",
        "# plane = (batch * channels + channel) * outer positions + outer position",
        f"nc = plane // {math.prod(kernel.out_sizes[:-2])}",
        f"c = nc % {kernel.groups}",
        f"x_base = (nc // {kernel.groups}) * {xs[0]} + c * {xs[1]}",
        f"w_base = c * {kernel.w_group}",
    ]
    cols = columns(kernel)
    lines += cols.setup()
    outer = _outer_taps(kernel, lines)
    weights = _weights(kernel, lines)
    if dims == 1:
        body = _loads(kernel, cols, outer, row=None)
        for lane in range(cols.lanes):
            pairs = _products(kernel, cols, outer, weights, [0], lane)
            body += _accumulate(_lane("acc", cols, lane), None, pairs)
        body += cols.join("acc")
        return [*lines, *body, f"idx = plane * {out_w} + ow", "mask = col_ok", *stores]
    if rolling(kernel):
        return lines + _rolling_loop(kernel, cols, outer, weights, stores)
    return lines + _window_loop(kernel, cols, outer, weights, stores)


def _lane(name: str, cols: TapColumns, lane: int) -> str:
    """The name of `name`'s values at one lane (the name itself when a lane owns one output)."""
    return name if cols.lanes == 1 else f"{name}_{lane}"


def _outer_taps(kernel: ConvKernel, lines: list[str]) -> list[tuple[str, str]]:
    """(offset, in-bounds test) of each outer kernel position (a 3-d kernel's depth): scalars,
    fixed for the program."""
    dims, xs = len(kernel.kernel), kernel.x_strides
    if dims < 3:
        return [("0", "")]
    outs = coordinates(
        f"plane % {math.prod(kernel.out_sizes[:-2])}", kernel.out_sizes[:-2], "o", lines
    )
    per_dim = []
    for d in range(dims - 2):
        s, p, dil, size = (
            kernel.stride[d],
            kernel.padding[d],
            kernel.dilation[d],
            kernel.in_sizes[d],
        )
        taps = []
        for k in range(kernel.kernel[d]):
            lines.append(f"i{d}_{k} = {outs[d]} * {s} + {k * dil - p}")
            test = f"(i{d}_{k} >= 0) & (i{d}_{k} < {size})"
            taps.append((f"i{d}_{k} * {xs[2 + d]}", test))
        per_dim.append(taps)
    combined = []
    for t, taps in enumerate(itertools.product(*per_dim)):
        lines.append(f"od{t} = {' + '.join(offset for offset, _ in taps)}")
        lines.append(f"dok{t} = {' & '.join(test for _, test in taps)}")
        combined.append((f"od{t}", f"dok{t}"))
    return combined


def _weights(kernel: ConvKernel, lines: list[str]) -> dict[tuple[int, ...], str]:
    """Every weight of the channel's window, loaded once: name by kernel position."""
    names = {}
    for position in itertools.product(*(range(k) for k in kernel.kernel)):
        name = "w_" + "_".join(map(str, position))
        steps = (f"{k * s}" for k, s in zip(position, kernel.w_k, strict=True) if k)
        offset = " + ".join(["w_base", *steps])
        lines.append(f"{name} = tl.load({kernel.w} + {offset}).to(tl.float32)")
        names[position] = name
    return names


def _loads(
    kernel: ConvKernel, cols: TapColumns, outer, row: tuple[str, str, str] | None
) -> list[str]:
    """Loads of one input row (row: name suffix, offset and in-bounds test, or None for 1-d)
    at every outer tap, named v{suffix}_{outer} and then by column (depthwise_columns.py)."""
    suffix, row_offset, row_ok = row or ("", "", "")
    lines = []
    for t, (outer_offset, outer_ok) in enumerate(outer):
        offset = " + ".join(o for o in ("x_base", outer_offset, row_offset) if o not in ("", "0"))
        mask = " & ".join(m for m in (outer_ok, row_ok) if m)
        lines += cols.loads(kernel.x, offset, mask, f"v{suffix}_{t}")
    return lines


def _products(kernel: ConvKernel, cols: TapColumns, outer, weights, k_rows: list[int], lane: int,
              window: bool = False):  # fmt: skip
    """(weight, value) of every tap at the kernel rows k_rows for one lane's output, in
    kernel-position order (outer, row, column); `window`: each kernel row's values are its own
    loads (v r{k}_...)."""
    pairs = []
    outer_positions = list(itertools.product(*(range(k) for k in kernel.kernel[:-2])))
    rows = k_rows if len(kernel.kernel) > 1 else [None]
    for t in range(len(outer)):
        for k_row in rows:
            name = f"v{f'r{k_row}' if window else ''}_{t}"
            for k in range(kernel.kernel[-1]):
                position = (*outer_positions[t], *([] if k_row is None else [k_row]), k)
                pairs.append((weights[position], cols.value(name, k, lane)))
    return pairs


def _accumulate(name: str, start: str | None, pairs) -> list[str]:
    """name = start + w * v + ..., one FMA a tap in kernel-position order: the flat kernel's
    order, which matched cuDNN's depthwise results bit for bit on level1/82-86 (a
    depthwise-separable convolution's TF32 pointwise step turns a last-bit difference into
    1.2e-4: level1/86)."""
    lines = []
    for weight, value in pairs:
        product = f"{weight} * {value}" if start is None else f"tl.fma({weight}, {value}, {start})"
        lines.append(f"{name} = {product}")
        start = name
    return lines


def _row_test(kernel: ConvKernel, name: str) -> str:
    """An input row inside the input: above it only with padding; below it past the last
    chunk, or where the window overruns."""
    below = f"({name} < {kernel.in_sizes[-2]})"
    return f"({name} >= 0) & {below}" if kernel.padding[-2] else below


def _rolling_loop(
    kernel: ConvKernel, cols: TapColumns, outer, weights, stores: list[str]
) -> list[str]:
    """Stride 1 down the rows: input row oh0 - padding + j reaches output rows oh0 + j - k for
    each kernel row k; p{k} carries the partial sum of output row oh0 + j - k to the next
    input row, and the row kernel row kh - 1 completes is stored."""
    kh, pad, xs = kernel.kernel[-2], kernel.padding[-2], kernel.x_strides[-2]
    out_w, out_h = kernel.out_sizes[-1], kernel.out_sizes[-2]
    lanes = range(cols.lanes)
    lines = [f"{_lane(f'p{k}', cols, j)} = tl.zeros({cols.shape}, tl.float32)"
             for k in range(kh - 1) for j in lanes]  # fmt: skip
    body = [f"ih = oh0 + j - {pad}" if pad else "ih = oh0 + j"]
    body += _loads(kernel, cols, outer, ("", f"ih * {xs}", _row_test(kernel, "ih")))
    for j in lanes:
        done = _lane(f"p{kh - 2}", cols, j) if kh > 1 else None
        pairs = _products(kernel, cols, outer, weights, [kh - 1], j)
        body += _accumulate(_lane("acc", cols, j), done, pairs)
        for k in reversed(range(kh - 1)):
            carried = _lane(f"p{k - 1}", cols, j) if k > 0 else None
            pairs = _products(kernel, cols, outer, weights, [k], j)
            body += _accumulate(_lane(f"p{k}", cols, j), carried, pairs)
    body += [
        *cols.join("acc"),
        f"oh = oh0 + j - {kh - 1}",
        f"idx = plane * {out_h * out_w} + oh * {out_w} + ow",
        f"mask = col_ok & (oh >= oh0) & (oh < {out_h})",
        *stores,
    ]
    return [*lines, f"for j in range(ROWS + {kh - 1}):", *_indent(body)]


def _window_loop(
    kernel: ConvKernel, cols: TapColumns, outer, weights, stores: list[str]
) -> list[str]:
    """Rows strided or dilated: each output row reads its whole window."""
    kh, s, pad, dil = kernel.kernel[-2], kernel.stride[-2], kernel.padding[-2], kernel.dilation[-2]
    out_w, out_h, xs = kernel.out_sizes[-1], kernel.out_sizes[-2], kernel.x_strides[-2]
    body = ["oh = oh0 + j"]
    for k in range(kh):
        body.append(f"ih{k} = oh * {s} + {k * dil - pad}")
        row = (f"r{k}", f"ih{k} * {xs}", _row_test(kernel, f"ih{k}"))
        body += _loads(kernel, cols, outer, row)
    for j in range(cols.lanes):
        pairs = _products(kernel, cols, outer, weights, list(range(kh)), j, window=True)
        body += _accumulate(_lane("acc", cols, j), None, pairs)
    body += [
        *cols.join("acc"),
        f"idx = plane * {out_h * out_w} + oh * {out_w} + ow",
        f"mask = col_ok & (oh < {out_h})",
        *stores,
    ]
    return ["for j in range(ROWS):", *_indent(body)]
