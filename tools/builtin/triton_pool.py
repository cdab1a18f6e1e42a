"""Triton source, configs and launch of a pooling kernel (tools/builtin/pooling.py).

One output element per lane: a program takes BLOCK consecutive outputs (contiguous stores, and
along the innermost pooled dim neighbouring lanes read neighbouring inputs), splits their flat
index into the plane and the output coordinates, and walks the window: per dim the input
coordinate and a mask for the padding (or the end of an adaptive window), then a masked load
and max (NaN wins, the first maximum's index is kept, as in torch) or sum. An average divides
by torch's count; the epilogue's stores follow. A 1d pool with stride 1 over aligned rows takes
tools/builtin/triton_pool_rows.py instead.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin import triton_pool_rows
from kernelgraph.tools.builtin.pooling import PoolKernel, Window
from kernelgraph.tools.builtin.printer import Printer
from kernelgraph.tools.builtin.triton_emit import TritonSyntax, _indent, _signature

DIMS = ("d", "h", "w")
UNROLL = 8  # windows up to this long are unrolled (tl.static_range); longer ones loop
INTERPRETER_BLOCK = 1 << 16


def _wrap(text: str) -> str:
    return f"({text})" if " " in text else text


def _times(name: str, factor: int) -> str:
    return name if factor == 1 else f"{name} * {factor}"


def _plus(text: str, value: int) -> str:
    return text if value == 0 else f"{text} + {value}" if value > 0 else f"{text} - {-value}"


def _start(n: str, w: Window) -> str:
    """The window's first input coordinate along dim n (adaptive: floor(o * n_in / n_out))."""
    if w.adaptive:
        return f"o{n} * {w.n_in} // {w.n_out}"
    return _plus(_times(f"o{n}", w.stride), -w.padding)


def _checks(n: str, w: Window) -> list[str]:
    """The bounds tests x{n} needs: none where every window lies inside the input."""
    if w.adaptive:
        return [] if w.n_in % w.n_out == 0 else [f"(x{n} < e{n})"]
    last = (w.n_out - 1) * w.stride - w.padding + (w.size - 1) * w.dilation
    return [f"(x{n} >= 0)"] * (w.padding > 0) + [f"(x{n} < {w.n_in})"] * (last >= w.n_in)


def _count(n: str, w: Window, include_pad: bool) -> str:
    """How many inputs of the window the average divides by along dim n (torch's rule)."""
    if w.adaptive:
        return f"(e{n} - s{n})"
    if include_pad:
        return f"(tl.minimum(s{n} + {w.size}, {w.n_in + w.padding}) - s{n})"
    return f"(tl.minimum(s{n} + {w.size}, {w.n_in}) - tl.maximum(s{n}, 0))"


def _window_loops(kernel: PoolKernel, names: tuple[str, ...]) -> list[str]:
    """Nested loops over the window, innermost dim last, with the load and combine inside."""
    index = kernel.mode == "max" and kernel.uses_index()
    offset = " + ".join(["base", *(_times(f"x{n}", w.in_stride)
                                   for n, w in zip(names, kernel.windows, strict=True))])  # fmt: skip
    other = '-float("inf")' if kernel.mode == "max" else "0.0"
    load = f"tl.load({kernel.source} + {offset}, mask={{valid}}, other={other})"
    inner = [f"v = {load}.to(tl.float32)"]
    if kernel.mode == "avg":
        inner.append("acc += v")
    elif index:
        position = "0"
        for n, w in zip(names, kernel.windows, strict=True):
            position = f"x{n}" if position == "0" else f"{_wrap(position)} * {w.n_in} + x{n}"
        inner += [
            "take = {valid} & ((v > acc) | (v != v) | (arg < 0))",
            "acc = tl.where(take, v, acc)",
            f"arg = tl.where(take, {position}, arg)",
        ]
    else:
        inner.append("acc = tl.where((v > acc) | (v != v), v, acc)")
    valid = "mask"
    levels: list[tuple[str, list[str]]] = []
    for n, w in zip(names, kernel.windows, strict=True):
        head = f"tl.static_range({w.size})" if w.size <= UNROLL else f"range({w.size})"
        lines = [f"x{n} = s{n} + {_times('k' + n, w.dilation)}"]
        checks = _checks(n, w)
        if checks:
            lines.append(f"valid_{n} = {' & '.join([valid, *checks])}")
            valid = f"valid_{n}"
        levels.append((f"for k{n} in {head}:", lines))
    body = [line.format(valid=valid) for line in inner]
    for head, lines in reversed(levels):
        body = [head, *_indent(lines + body)]
    return body


def pool_source(kernel: PoolKernel, gpu: bool) -> str:
    if triton_pool_rows.applies(kernel):
        return triton_pool_rows.pool_source(kernel, gpu, epilogue(kernel, gpu))
    names = DIMS[len(DIMS) - len(kernel.windows) :]
    start = "tl.program_id(0).to(tl.int64)" if kernel.wide else "tl.program_id(0)"
    body = [
        f"idx = {start} * BLOCK + tl.arange(0, BLOCK)",
        f"mask = idx < {kernel.numel}",
        "# output coordinates, innermost first; plane = the leading (batch, channel) dims",
    ]
    rest = "idx"
    for n, w in reversed(list(zip(names, kernel.windows, strict=True))):
        body.append(f"o{n} = {rest} % {w.n_out}")
        rest = f"{rest} // {w.n_out}"
    body.append(f"plane = {rest}")
    base = Printer(TritonSyntax(gpu), {"plane": "plane"}).index(kernel.plane_offset)
    body.append(f"base = {base}")
    for n, w in zip(names, kernel.windows, strict=True):
        body.append(f"s{n} = {_start(n, w)}")
        if w.adaptive:
            body.append(f"e{n} = ((o{n} + 1) * {w.n_in} + {w.n_out - 1}) // {w.n_out}")
    if kernel.mode == "max":
        body.append('acc = tl.full([BLOCK], -float("inf"), tl.float32)')
        if kernel.uses_index():
            int_type = "tl.int64" if kernel.wide else "tl.int32"
            body.append(f"arg = tl.full([BLOCK], -1, {int_type})")
    else:
        body.append("acc = tl.zeros([BLOCK], tl.float32)")
    body += _window_loops(kernel, names)
    return "\n".join([_signature(kernel, ["BLOCK"]), *_indent(body + epilogue(kernel, gpu))])


def epilogue(kernel: PoolKernel, gpu: bool) -> list[str]:
    """The average's division, then the stores of var("acc") (and "arg") at `idx` under
    `mask`: the lines after the window, shared with tools/builtin/triton_pool_rows.py."""
    names = DIMS[len(DIMS) - len(kernel.windows) :]
    body = []
    if kernel.mode == "avg":
        constant = kernel.divisor()
        if constant is not None:
            body.append(f"acc = acc / {float(constant)!r}")
        else:
            counts = [_count(n, w, kernel.count_include_pad)
                      for n, w in zip(names, kernel.windows, strict=True)]  # fmt: skip
            body.append(f"acc = acc / ({' * '.join(counts)}).to(tl.float32)")
    printer = Printer(TritonSyntax(gpu), {"acc": "acc", "arg": "arg"}, prefix="e")
    for store in kernel.stores:
        value = printer.value(store.value)
        body += printer.take() + [f"tl.store({store.arg} + idx, {value}, mask=mask)"]
    return body


def default(kernel: PoolKernel, gpu: bool) -> dict[str, Any]:
    if triton_pool_rows.applies(kernel):
        return triton_pool_rows.default(kernel, gpu)
    if not gpu:  # the interpreter: fewest program instances
        return {"BLOCK": min(1 << max(kernel.numel - 1, 0).bit_length(), INTERPRETER_BLOCK),
                "num_warps": 1}  # fmt: skip
    # H100, KernelBench's pools at real sizes (41, 43, 44, 45): 256 outputs a program beat 128
    # and 512 to 2048; one output a thread for long windows (27 and 121 loads), two for short
    return {"BLOCK": 256, "num_warps": 8 if kernel.window_numel > 16 else 4}


def tunables(kernel: PoolKernel, gpu: bool) -> dict[str, list[Any]]:
    if triton_pool_rows.applies(kernel):
        return triton_pool_rows.tunables(gpu)
    return {"BLOCK": [128, 256, 512, 1024], "num_warps": [2, 4, 8]} if gpu else {}


def launch(kernel: PoolKernel, args: list[str], config: dict[str, Any]) -> list[str]:
    if triton_pool_rows.applies(kernel):
        return triton_pool_rows.launch(kernel, args, config)
    grid = f"(triton.cdiv({kernel.numel}, {config['BLOCK']}),)"
    options = ", ".join(f"{k}={v!r}" for k, v in config.items())
    return [f"{kernel.name}[{grid}]({', '.join(args)}, {options})"]
