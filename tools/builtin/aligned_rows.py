"""Resident rows whose starts are not 16-byte aligned, read and written as vectors.

A row of 65535 fp32 (level1/38) starts at a different offset modulo 4 each row, so its loads and
stores go element by element: two address registers an element, 128 registers a thread, half the
programs an SM. Here a row's chunks start at the aligned element at or before the row, so every
load is a vector of ALIGN; the few elements of the neighbouring rows it reads are masked out of
the sums. Stores cannot write a neighbour's elements, so the aligned groups wholly inside the row
are stored as vectors and chunk 0's program recomputes and stores the row's two partial groups
(at most ALIGN - 1 elements each).
"""

from __future__ import annotations

from kernelgraph.tools.builtin.expr import Expr, var
from kernelgraph.tools.builtin.kernels import FusedKernel
from kernelgraph.tools.builtin.printer import Printer

ALIGN = 4  # fp32 elements in 16 bytes


def applies(kernel: FusedKernel) -> bool:
    """Misaligned rows, where every aligned group a row touches lies inside the tensor."""
    return kernel.rlen % ALIGN != 0 and kernel.numel % ALIGN == 0


def lead(kernel: FusedKernel) -> int:
    """Elements a row's first chunk may start before the row."""
    return ALIGN - 1 if applies(kernel) else 0


def position(length: int) -> list[str]:
    """Indices and masks of a chunk, after `k`, `kmask` and `chunk`: `mask` the row's own
    elements (sums), `lmask` the aligned groups it touches (loads), `smask` the groups wholly
    inside it (vector stores)."""
    a = ALIGN
    return [
        f"start = k * {length}",
        f"idx = start // {a} * {a} + chunk * BLOCK_R + tl.arange(0, BLOCK_R)[None, :]",
        "r = idx - start",
        f"mask = kmask & (r >= 0) & (r < {length})",
        f"lmask = kmask & (idx < (start + {length + a - 1}) // {a} * {a})",
        f"smask = kmask & (idx >= (start + {a - 1}) // {a} * {a}) "
        f"& (idx < (start + {length}) // {a} * {a})",
    ]


def own_elements(offset: Expr) -> tuple[str, str] | None:
    """A load of the element's own position takes the vector-wide mask."""
    return ("idx", "lmask") if offset == var("idx") else None


def edge_stores(kernel: FusedKernel, printer: Printer, stores: list, wide: str) -> list[str]:
    """Chunk 0 recomputes and stores the row's partial first and last groups, one scalar
    element at a time: as a [1, 2 x ALIGN] tensor the same stores kept 24 more registers live
    (level1/38, sm_90: 96 against 72, 5 programs an SM against 7). `printer` is a fresh one
    whose names hold the row's reductions; `wide` widens the row for int64 offsets."""
    a, length = ALIGN, kernel.rlen
    printer.names.update({"idx": "e_idx", "r": "e_r", "k": "e_row"})
    printer.offsets = lambda offset: (printer.index(offset), "emask")
    lines = [
        f"e_row = row{wide}",
        f"e_start = e_row * {length}",
        f"e_idx = tl.where(j < {a}, e_start // {a} * {a} + j, "
        f"(e_start + {length}) // {a} * {a} + j - {a})",
        "e_r = e_idx - e_start",
        f"emask = (row < {kernel.rows}) & (e_r >= 0) & (e_r < {length}) & ("
        f"(e_idx < (e_start + {a - 1}) // {a} * {a}) | (e_idx >= (e_start + {length}) // {a} * {a}))",
    ]
    for store in stores:
        value = printer.value(store.value)
        lines += printer.take() + [f"tl.store({store.arg} + e_idx, {value}, mask=emask)"]
    return ["if chunk == 0:", f"    for j in range(0, {2 * a}):", *(f"        {x}" for x in lines)]
