"""Triton source of a scan kernel (tools/builtin/scans.py): BLOCK_K rows per program, each row
walked in BLOCK_R-wide blocks; within a block tl.cumsum (tl.associative_scan for a product or
a log-sum-exp) along axis 1, across blocks a carried prefix per row. Contiguous rows (inner == 1) are read
along r; strided ones tile BLOCK_K neighbouring rows, which lie next to each other in memory.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin.expr import walk
from kernelgraph.tools.builtin.printer import Printer
from kernelgraph.tools.builtin.scans import IDENTITY, ScanKernel
from kernelgraph.tools.builtin.triton_emit import INT32_LIMIT, TritonSyntax, _indent, _signature

SCAN = {"sum": "tl.cumsum(x, axis=1{rev})", "prod": "tl.associative_scan(x, 1, _multiply{rev})",
        "logsumexp": "tl.associative_scan(x, 1, _logaddexp{rev})"}  # fmt: skip
TOTAL = {"sum": "tl.sum(x, axis=1)[:, None]", "prod": "tl.reduce(x, 1, _multiply)[:, None]",
         "logsumexp": "tl.reduce(x, 1, _logaddexp)[:, None]"}  # fmt: skip
APPLY = {"sum": "carry + {a}", "prod": "carry * {a}", "logsumexp": "_logaddexp(carry, {a})"}


def element(kernel: ScanKernel, r: str) -> str:
    """The flat index of row k's element at position `r` of the scanned dim."""
    if kernel.inner == 1:
        return f"k * {kernel.rlen} + {r}"
    return f"(k // {kernel.inner}) * {kernel.rlen * kernel.inner} + {r} * {kernel.inner} + k % {kernel.inner}"


def _uses_mirror(kernel: ScanKernel) -> bool:
    exprs = [kernel.value, *(e for st in kernel.stores for e in (st.value, st.offset))]
    return any(n.op == "var" and n.attr == "fidx" for e in exprs for n in walk(e))


def scan_source(kernel: ScanKernel, gpu: bool) -> str:
    """Forward: blocks from the row's start; reverse: from its end, each block scanned
    backwards. The carry is the combined total of the blocks done so far."""
    printer = Printer(TritonSyntax(gpu), {"s": "s"})
    wide = kernel.numel > INT32_LIMIT
    first = "tl.program_id(0).to(tl.int64)" if wide else "tl.program_id(0)"
    identity, n = TritonSyntax(gpu).constant(IDENTITY[kernel.combine]), kernel.rlen
    value = printer.value(kernel.value)
    if kernel.reverse:
        window = [f"r = ({n} - BLOCK_R - start) + tl.arange(0, BLOCK_R)[None, :]",
                  f"mask = kmask & (r >= 0) & (r < {n})"]  # fmt: skip
    else:
        window = ["r = start + tl.arange(0, BLOCK_R)[None, :]", f"mask = kmask & (r < {n})"]
    scan = SCAN[kernel.combine].format(rev=", reverse=True" if kernel.reverse else "")
    lines = printer.take()
    mirror = [f"fidx = {element(kernel, f'({n - 1} - r)')}"] if _uses_mirror(kernel) else []
    loop = [
        *window,
        f"idx = {element(kernel, 'r')}",
        *mirror,
        *lines,
        f"x = tl.where(mask, {value}, {identity})",
        f"s = {APPLY[kernel.combine].format(a=scan)}",
        f"carry = {APPLY[kernel.combine].format(a=TOTAL[kernel.combine])}",
    ]
    for store in kernel.stores:
        out = printer.value(store.value)
        loop += printer.take()
        loop.append(f"tl.store({store.arg} + {printer.index(store.offset)}, {out}, mask=mask)")
    body = [
        f"k = {first} * BLOCK_K + tl.arange(0, BLOCK_K)[:, None]",
        f"kmask = k < {kernel.rows}",
        f"carry = tl.full([BLOCK_K, 1], {identity}, tl.float32)",
        f"for start in range(0, {n}, BLOCK_R):",
        *_indent(loop),
    ]
    return "\n".join([_signature(kernel, ["BLOCK_K", "BLOCK_R"]), *_indent(body)])


def default(kernel: ScanKernel, gpu: bool) -> dict[str, Any]:
    """Contiguous rows: one program per row (a few when rows are short), 2048-wide blocks;
    strided rows: 64 neighbouring rows by 16 steps. Under the interpreter, the fewest
    programs."""
    from kernelgraph.tools.builtin.triton_backend import (  # imports this module
        INTERPRETER_BLOCK,
        next_pow2,
    )

    block_r = next_pow2(kernel.rlen)
    if not gpu:
        block_r = min(block_r, INTERPRETER_BLOCK)
        block_k = max(1, min(next_pow2(kernel.rows), INTERPRETER_BLOCK // block_r))
        return {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": 1}
    if kernel.inner > 1:
        return {"BLOCK_K": min(next_pow2(kernel.rows), 64), "BLOCK_R": min(block_r, 16),
                "num_warps": 4}  # fmt: skip
    block_r = min(block_r, 2048)
    block_k = max(1, min(next_pow2(kernel.rows), 2048 // block_r))
    return {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": 4 if block_r < 2048 else 8}


def tunables(kernel: ScanKernel, gpu: bool) -> dict[str, list[Any]]:
    if not gpu:
        return {}
    if kernel.inner > 1:
        return {"BLOCK_K": [32, 64, 128], "BLOCK_R": [8, 16, 32], "num_warps": [4, 8]}
    if kernel.rlen > 2048:
        return {"BLOCK_R": [1024, 2048, 4096], "num_warps": [4, 8, 16]}
    return {"num_warps": [2, 4, 8]}


def launch(kernel: ScanKernel, args: list[str], config: dict[str, Any]) -> list[str]:
    grid = f"(triton.cdiv({kernel.rows}, {config['BLOCK_K']}),)"
    options = ", ".join(f"{k}={v!r}" for k, v in config.items())
    return [f"{kernel.name}[{grid}]({', '.join(args)}, {options})"]
