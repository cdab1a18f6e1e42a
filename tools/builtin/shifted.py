"""A mean and a variance in one read of the row: shifted sums.

A normalisation's statistics trace as two reductions, `r_i = sum(E)` and then
`r_j = sum((E - S(r_i))^2)` with S the mean. The second needs the first, so a row too long to
hold is read twice. Shifted by K, the row's first value of E, both sums are independent:

    D = sum(E - K),  Q = sum((E - K)^2)
    r_i = D + N K,   r_j = Q - 2 A D + N A^2   where A = S(r_i) - K

which is exact algebra, and accurate in floating point because K is a value of the row: the
cancellation in Q - D^2/N grows with (mean - K)^2 / variance, about 1 for a sample of the row,
where the unshifted sum of squares loses everything to a mean much larger than the spread.
A backend asks for this only on rows it reads in a loop (`loops_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kernelgraph.tools.builtin.expr import Expr, Load, call, const, is_const, substitute, var
from kernelgraph.tools.builtin.kernels import FusedKernel, Reduction, Store
from kernelgraph.tools.builtin.program import Program


def shift_program(program: Program, loops_rows: Callable[[FusedKernel], bool]) -> Program:
    steps = []
    for step in program.steps:
        kernel = step.kernel
        if isinstance(kernel, FusedKernel) and loops_rows(kernel):
            step = replace(step, kernel=shift_variances(kernel))
        steps.append(step)
    return replace(program, steps=steps)


def variance_pairs(kernel: FusedKernel) -> dict[int, tuple[int, Expr]]:
    """i -> (j, S) for each `r_j = sum((E - S(r_i))^2)` over an earlier `r_i = sum(E)`, where
    S uses r_i and nothing else of the row."""
    pairs: dict[int, tuple[int, Expr]] = {}
    for j, reduction in enumerate(kernel.reductions):
        deviation = _squared(reduction.value) if reduction.kind == "sum" else None
        if deviation is None or deviation.op != "sub":
            continue
        e, shift = deviation.args
        i = kernel.earlier_over(j, "sum", e, shift, pairs)
        if i is not None:
            pairs[i] = (j, shift)
    return pairs


def shift_variances(kernel: FusedKernel) -> FusedKernel:
    """The kernel with each variance pair made of two independent shifted sums; what used
    r_i and r_j (stores, later reductions) gets them back from D and Q."""
    pairs = variance_pairs(kernel)
    if not pairs:
        return kernel
    reductions = list(kernel.reductions)
    rewrites: list[Callable[[Expr], Expr]] = []
    n = const(float(kernel.rlen))
    for i, (j, shift) in pairs.items():
        e = reductions[i].value
        first = _at_row_start(e, kernel)
        d = call("sub", e, first)
        reductions[i] = Reduction("sum", d)
        reductions[j] = Reduction("sum", call("mul", d, d))
        restore = _restorer(var(f"r{i}"), first, n)
        mean = call("div", var(f"r{i}"), n)
        a = mean if shift == mean else call("sub", restore(shift), first)
        two_d_minus_na = call("sub", call("mul", const(2.0), var(f"r{i}")), call("mul", n, a))
        squares = call("sub", var(f"r{j}"), call("mul", a, two_d_minus_na))
        squares = call("max", squares, const(0.0))  # rounding must not go below zero
        rewrites += [restore, _replacer(var(f"r{j}"), squares)]
    changed = {i for i in pairs} | {j for j, _ in pairs.values()}

    def restored(e: Expr) -> Expr:
        for rewrite in rewrites:
            e = rewrite(e)
        return e

    reductions = [
        r if index in changed else Reduction(r.kind, restored(r.value))
        for index, r in enumerate(reductions)
    ]
    stores = [Store(s.arg, restored(s.value), s.space) for s in kernel.stores]
    return replace(kernel, reductions=reductions, stores=stores)


def _restorer(d: Expr, first: Expr, n: Expr) -> Callable[[Expr], Expr]:
    """Puts the sum back where r_i was used: D / N + K for the mean (adding N K to D first would
    round the mean to the ulp of the row's total), D + N K elsewhere."""
    mean = call("div", d, n)
    return _rewriter({mean: call("add", mean, first), d: call("add", d, call("mul", n, first))})


def _replacer(old: Expr, new: Expr) -> Callable[[Expr], Expr]:
    return _rewriter({old: new})


def _rewriter(table: dict[Expr, Expr]) -> Callable[[Expr], Expr]:
    """Replaces subtrees found in `table`, outermost first, without looking into what it put."""

    def rewrite(e: Expr) -> Expr:
        if e in table:
            return table[e]
        if e.op == "load":
            load = e.attr
            return Expr("load", attr=Load(load.tensor, rewrite(load.offset), load.space))
        if not e.args:
            return e
        return Expr(e.op, tuple(rewrite(a) for a in e.args), e.attr)

    return rewrite


def _squared(e: Expr) -> Expr | None:
    """x for x * x or x ** 2."""
    if e.op == "mul" and e.args[0] == e.args[1]:
        return e.args[0]
    if e.op == "pow" and is_const(e.args[1], 2.0):
        return e.args[0]
    return None


def _at_row_start(e: Expr, kernel: FusedKernel) -> Expr:
    """E at the first element of the row: a row value (its loads masked by the row's mask)."""
    k = var("k")
    if kernel.inner == 1:
        start = Expr("imul", (k, const(kernel.rlen)))
    else:
        outer = Expr("imul", (Expr("idiv", (k, const(kernel.inner))),
                              const(kernel.rlen * kernel.inner)))  # fmt: skip
        start = Expr("iadd", (outer, Expr("imod", (k, const(kernel.inner)))))
    return _as_row(substitute(e, {"idx": start}))


def _as_row(e: Expr) -> Expr:
    if e.op == "load":
        return Expr("load", attr=Load(e.attr.tensor, e.attr.offset, "row"))
    if not e.args:
        return e
    return Expr(e.op, tuple(_as_row(a) for a in e.args), e.attr)
