"""A group's reductions taken out of its expressions, each sum's row-constant factors outside it:
sum_r(x[r] / c * y[r] / d) = sum_r(x * y) / (c * d).

Cosine similarity normalises each row by its norms before the dot product, so as traced the
dot product reads the row again after the norms are known. With the norms' factors taken out
of the sum, the three sums are independent of each other and a kernel computes them in one
pass over the row (tools/builtin/groups.py builds its row kernels with `extract_reductions`).
"""

from __future__ import annotations

import re

from kernelgraph.tools.builtin.expr import Expr, call, var, walk
from kernelgraph.tools.builtin.kernels import Reduction, Store

_ROW_VARS = re.compile(r"k|r\d+")  # the row index and earlier reductions' row values


def row_constant(e: Expr) -> bool:
    """Whether `e` has one value per row: no full-space load, no full-space index."""
    for node in walk(e):
        if node.op == "load" and node.attr.space != "row":
            return False
        if node.op == "var" and not _ROW_VARS.fullmatch(node.attr):
            return False
    return True


def extract_reductions(stores: list[Store]) -> tuple[list[Store], list[Reduction]]:
    """The stores with each distinct reduction replaced by var("rN") (times its factors), and
    the reductions, in the order the stores first use them."""
    reductions: list[Reduction] = []
    found: dict[Expr, Expr] = {}

    def extract(e: Expr) -> Expr:
        if e.op in ("const", "var", "load"):
            return e
        args = tuple(extract(a) for a in e.args)
        if e.op != "reduce":
            return Expr(e.op, args, e.attr)
        summed, times, over = hoist_factors(e.attr, args[0])
        key = Expr("reduce", (summed,), e.attr)
        if key not in found:
            found[key] = var(f"r{len(reductions)}")
            reductions.append(Reduction(e.attr, summed))
        value = found[key]
        for factor in times:  # one at a time: a product of two norms may overflow
            value = call("mul", value, factor)
        for factor in over:
            value = call("div", value, factor)
        return value

    return [Store(s.arg, extract(s.value), s.space) for s in stores], reductions


def hoist_factors(kind: str, value: Expr) -> tuple[Expr, list[Expr], list[Expr]]:
    """(what to sum, row-constant multipliers, row-constant divisors) for `reduce(kind, value)`;
    no factors where there is nothing to take out."""
    if kind != "sum" or row_constant(value):
        return value, [], []
    return _split(value)


def _split(e: Expr) -> tuple[Expr, list[Expr], list[Expr]]:
    """`e` as varying * prod(times) / prod(over), the factors row-constant."""
    if e.op == "mul":
        a, b = e.args
        if row_constant(a):
            v, t, o = _split(b)
            return v, [a, *t], o
        if row_constant(b):
            v, t, o = _split(a)
            return v, [*t, b], o
        va, ta, oa = _split(a)
        vb, tb, ob = _split(b)
        return call("mul", va, vb), ta + tb, oa + ob
    if e.op == "div":
        a, b = e.args
        va, ta, oa = _split(a)
        if row_constant(b):
            return va, ta, [*oa, b]
        return call("div", va, b), ta, oa
    return e, [], []
