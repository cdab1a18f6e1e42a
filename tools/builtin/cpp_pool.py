"""C++ (OpenMP, CPU) source of a pooling kernel (tools/builtin/pooling.py).

Threads share the output elements (planes outermost, so each thread reads a contiguous stretch
of the input); per element the window's valid range along each dim is computed up front, so
the loops read no padding and test no bounds. Max keeps NaN and the first maximum's index (as
torch does); averages divide by torch's count; then the epilogue's stores.
"""

from __future__ import annotations

from kernelgraph.tools.builtin.cpp_emit import (
    CppSyntax,
    dynamic_outputs,
    indent,
    loop,
    print_stores,
    signature,
)
from kernelgraph.tools.builtin.cpp_rows import DOUBLE_SUM_RLEN
from kernelgraph.tools.builtin.pooling import PoolKernel, Window
from kernelgraph.tools.builtin.printer import Printer

DIMS = ("d", "h", "w")
PARALLEL = "#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)"


def _wrap(text: str) -> str:
    return f"({text})" if " " in text else text


def _times(name: str, factor: int) -> str:
    return name if factor == 1 else f"{name} * {factor}"


def _range(n: str, w: Window) -> list[str]:
    """s{n} (the window's first input coordinate) and [k{n}0, k{n}1): the k whose input
    coordinate s{n} + k * dilation lies inside the input (and inside an adaptive window)."""
    if w.adaptive:
        return [
            f"const int64_t s{n} = o{n} * {w.n_in} / {w.n_out};",
            f"const int64_t k{n}0 = 0, k{n}1 = ((o{n} + 1) * {w.n_in} + {w.n_out - 1}) / {w.n_out}"
            f" - s{n};",
        ]
    d = w.dilation
    start = _times(f"o{n}", w.stride) + (f" - {w.padding}" if w.padding else "")
    return [
        f"const int64_t s{n} = {start};",
        f"const int64_t k{n}0 = s{n} < 0 ? (-s{n} + {d - 1}) / {d} : 0;",
        f"const int64_t k{n}1 = std::min<int64_t>({w.size}, ({w.n_in} - s{n} + {d - 1}) / {d});",
    ]


def _count(n: str, w: Window, include_pad: bool) -> str:
    if include_pad and not w.adaptive:
        return f"(std::min<int64_t>(s{n} + {w.size}, {w.n_in + w.padding}) - s{n})"
    return f"(k{n}1 - k{n}0)"  # the valid inputs (avg has no dilation)


def pool_source(kernel: PoolKernel) -> str:
    names = DIMS[len(DIMS) - len(kernel.windows) :]
    pairs = list(zip(names, kernel.windows, strict=True))
    index = kernel.mode == "max" and kernel.uses_index()
    dynamic = dynamic_outputs(kernel.stores, {"arg"})
    body, rest = [], "idx"
    for n, w in reversed(pairs):
        body.append(f"const int64_t o{n} = {rest} % {w.n_out};")
        rest = f"{rest} / {w.n_out}"
    body.append(f"const int64_t plane = {rest};")
    offset = Printer(CppSyntax(), {"plane": "plane"}).index(kernel.plane_offset)
    body.append(f"const float* __restrict x = {kernel.source} + {offset};")
    for n, w in pairs:
        body += _range(n, w)
    long_sum = kernel.window_numel > DOUBLE_SUM_RLEN  # long windows add in double
    if kernel.mode == "max":
        body.append("float acc = -INFINITY;")
        body += ["int64_t arg = -1;"] if index else []
    else:
        body.append(f"{'double' if long_sum else 'float'} sum = 0;")
    at = " + ".join(_times(f"x{n}", w.in_stride) for n, w in pairs) or "0"
    inner = [f"const float v = x[{at}];"]
    if kernel.mode == "avg":
        inner.append("sum += v;")
    elif index:
        position = "0"
        for n, w in pairs:
            position = f"x{n}" if position == "0" else f"{_wrap(position)} * {w.n_in} + x{n}"
        inner.append(f"if (v > acc || v != v || arg < 0) {{ acc = v; arg = {position}; }}")
    else:
        inner.append("acc = (v > acc || v != v) ? v : acc;")
    for n, w in reversed(pairs):
        head = f"for (int64_t k{n} = k{n}0; k{n} < k{n}1; ++k{n})"
        inner = loop(head, [f"const int64_t x{n} = s{n} + {_times(f'k{n}', w.dilation)};", *inner])
    body += inner
    if kernel.mode == "avg":
        constant = kernel.divisor()
        if constant is not None:
            divisor = f"{float(constant)!r}"
        else:
            divisor = " * ".join(_count(n, w, kernel.count_include_pad) for n, w in pairs)
        body.append(f"const float acc = static_cast<float>(sum / static_cast<double>({divisor}));")
    printer = Printer(CppSyntax(), {"acc": "acc", "arg": "arg"}, prefix="e")
    body += print_stores(printer, kernel.stores, "idx", dynamic)
    lines = [
        signature(kernel, dynamic, ["threads"]) + " {",
        "    const int nt = kg_threads(threads);",
        *indent(loop(f"for (int64_t idx = 0; idx < {kernel.numel}; ++idx)", body, PARALLEL)),
        "}",
    ]
    return "\n".join(lines)
