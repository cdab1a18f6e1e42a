"""C++ (OpenMP) source of a scan kernel (tools/builtin/scans.py): each row walked in order
with a running total in double (torch's CPU cumsum and cumprod accumulate float in double; a
log-sum-exp carries in double too).
Contiguous rows (inner == 1) are shared among the threads, one row per iteration; strided rows
go in chunks of up to MAX_WIDTH neighbours, one `omp simd` step over the chunk per position,
so every load and store runs along memory.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin.cpp_emit import (
    MAX_WIDTH,
    CppSyntax,
    indent,
    index_type,
    loop,
    signature,
    uses,
)
from kernelgraph.tools.builtin.expr import Expr
from kernelgraph.tools.builtin.printer import Printer
from kernelgraph.tools.builtin.scans import ScanKernel

PARALLEL = "#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)"
IDENTITY = {"sum": "0.0", "prod": "1.0", "logsumexp": "-INFINITY"}
COMBINE = {
    "sum": "{a} += {v};",
    "prod": "{a} *= {v};",
    "logsumexp": "{a} = kg_logaddexp({a}, {v});",
}


def _exprs(kernel: ScanKernel) -> list[Expr]:
    return [kernel.value, *(e for s in kernel.stores for e in (s.value, s.offset))]


def scan_source(kernel: ScanKernel) -> str:
    strided = kernel.inner > 1
    limits = {"idx": kernel.numel, "fidx": kernel.numel, "k": kernel.rows, "r": kernel.rlen}
    ix = index_type(kernel, limits, _exprs(kernel))
    printer = Printer(CppSyntax(), {"s": "s"})
    acc = "carry[ii]" if strided else "carry"
    value = printer.value(kernel.value)
    step = [*printer.take(), COMBINE[kernel.combine].format(a=acc, v=value),
            f"const float s = static_cast<float>({acc});"]  # fmt: skip
    for store in kernel.stores:
        out = printer.value(store.value)
        step += printer.take() + [f"{store.arg}[{printer.index(store.offset)}] = {out};"]
    n, inner = kernel.rlen, kernel.inner
    first = f"o * {n * inner} + " if strided else f"k * {n}"
    within = " + i0 + ii" if strided else ""
    scale = f" * {inner}" if strided else ""
    positions = {
        "k": f"o * {inner} + i0 + ii" if strided else "",
        "idx": f"{first}{'r' + scale if strided else ' + r'}{within}",
        "fidx": f"{first}{f'({n - 1} - r)' + scale if strided else f' + ({n - 1} - r)'}{within}",
    }
    decls = [f"const {ix} {name} = {text};" for name, text in positions.items()
             if text and any(uses(line, name) for line in step)]  # fmt: skip
    r = f"{n - 1} - j" if kernel.reverse else "j"
    if strided:
        lanes = loop(f"for ({ix} ii = 0; ii < w; ++ii)", decls + step, "#pragma omp simd")
        walk = loop(f"for ({ix} j = 0; j < {n}; ++j)", [f"const {ix} r = {r};", *lanes])
        start = loop(
            f"for ({ix} ii = 0; ii < w; ++ii)", [f"carry[ii] = {IDENTITY[kernel.combine]};"]
        )
        chunk = [f"const {ix} i0 = c * W, w = std::min<{ix}>(W, {inner} - i0);",
                 f"double carry[{MAX_WIDTH}];", *start, *walk]  # fmt: skip
        body = loop(f"for ({ix} o = 0; o < {kernel.outer}; ++o)",
                    loop(f"for ({ix} c = 0; c < chunks; ++c)", chunk),
                    PARALLEL.replace("for ", "for collapse(2) "))  # fmt: skip
        head = [f"const {ix} W = static_cast<{ix}>(std::min<int64_t>(WIDTH < 1 ? 1 : WIDTH, "
                f"{MAX_WIDTH}));", f"const {ix} chunks = ({inner} + W - 1) / W;"]  # fmt: skip
        params = ["threads", "WIDTH"]
    else:
        walk = loop(f"for ({ix} j = 0; j < {n}; ++j)", [f"const {ix} r = {r};", *decls, *step])
        row = [f"double carry = {IDENTITY[kernel.combine]};", *walk]
        body = loop(f"for ({ix} k = 0; k < {kernel.rows}; ++k)", row, PARALLEL)
        head, params = [], ["threads"]
    return "\n".join([
        signature(kernel, set(), params) + " {",
        "    const int nt = kg_threads(threads);",
        *indent(head + body),
        "}",
    ])  # fmt: skip


def params(kernel: ScanKernel) -> list[str]:
    return ["threads", "WIDTH"] if kernel.inner > 1 else ["threads"]


def default(kernel: ScanKernel, parallel_min: int) -> dict[str, Any]:
    threads = 1 if kernel.numel < parallel_min else 0  # 0: all cores
    if kernel.inner == 1:
        return {"threads": threads}
    return {"threads": threads, "WIDTH": min(MAX_WIDTH, 1 << max(kernel.inner - 1, 0).bit_length())}


def tunables(kernel: ScanKernel, threads: list[int]) -> dict[str, list[Any]]:
    if kernel.inner == 1:
        return {"threads": threads}
    return {"threads": threads, "WIDTH": [16, 32, 64, 128, 256]}
