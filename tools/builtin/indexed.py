"""Pointwise ops whose value depends on where the element sits: triu and tril.

They register in `INDEXED` (tools/builtin/lowering.py) and see the element's `Position`; the
predicate is integer arithmetic on the flat index (column = idx % cols, row = idx // cols %
rows), so a triangle after a matrix product is the GEMM's epilogue, not another pass.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin.expr import Expr, as_expr, call, const, index_op
from kernelgraph.tools.builtin.lowering import INDEXED, Position


def row_and_column(at: Position) -> tuple[Expr, Expr]:
    """The element's (row, column) in the last two dims of its shape."""
    rows, cols = at.shape[-2], at.shape[-1]
    column = index_op("imod", at.index, cols)
    row = index_op("idiv", at.index, cols)
    if len(at.shape) > 2:
        row = index_op("imod", row, rows)
    return row, column


def _triangle(upper: bool):
    def lower(args: list[Any], kwargs: dict[str, Any], at: Position) -> Expr:
        diagonal = int(args[1] if len(args) > 1 else kwargs.get("diagonal", 0))
        row, column = row_and_column(at)
        # kept where column - row >= diagonal (triu) or <= diagonal (tril)
        shifted = Expr("iadd", (row, const(diagonal))) if diagonal else row
        keep = call("ge", column, shifted) if upper else call("le", column, shifted)
        return call("where", keep, as_expr(args[0]), const(0.0))

    return lower


INDEXED["triu"] = _triangle(upper=True)
INDEXED["tril"] = _triangle(upper=False)
