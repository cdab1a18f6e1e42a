"""Splitting work that has too few rows or tiles to fill a GPU.

A reduction with a handful of rows (x / x.norm() has one) or a GEMM with a handful of output
tiles and a long K keeps most of the device idle in one program per row or tile. Here such a
kernel becomes: scratch (fp64 for sums), partial kernels that combine chunks into it with atomics, then a
flat pointwise kernel for the epilogue. Which kernels to split is the backend's call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kernelgraph.tools.builtin.expr import INDEX_OPS, Expr, Load, const, substitute, var, walk
from kernelgraph.tools.builtin.hoisting import row_constant
from kernelgraph.tools.builtin.kernels import (
    FusedKernel,
    GemmKernel,
    PartialReduction,
    Reduction,
    Store,
)
from kernelgraph.tools.builtin.program import Program, Step

ATOMIC_KINDS = frozenset({"sum", "max", "min"})
SCRATCH_INIT = {"sum": "0.0", "max": "float('-inf')", "min": "float('inf')", "count": "0.0"}
# A sum over thousands of chunks, added one by one into fp32, drifts by ~1e-4 (HingeLoss's mean
# of 1G elements failed at 2.9e-4); max and min are exact in any precision.
SCRATCH_DTYPE = {"sum": "float64", "max": "float32", "min": "float32", "count": "float64"}
# ops whose results are not floats: a comparison stays in the flat kernel, not in a row value
NOT_FLOAT = frozenset("lt le gt ge eq ne and or not isnan to_bool".split()) | INDEX_OPS


def splittable(kernel: FusedKernel) -> bool:
    return bool(kernel.reductions) and all(r.kind in ATOMIC_KINDS for r in kernel.reductions)


def split_program(program: Program, split_k: Callable[[GemmKernel], int],
                  split_rows: Callable[[FusedKernel], bool]) -> Program:  # fmt: skip
    steps: list[Step] = []
    for step in program.steps:
        kernel = step.kernel
        if isinstance(kernel, FusedKernel) and splittable(kernel) and split_rows(kernel):
            steps += _split_reduction(step, kernel)
        elif isinstance(kernel, GemmKernel) and (parts := split_k(kernel)) > 1:
            steps += _split_gemm(step, kernel, parts)
        else:
            steps.append(step)
    return replace(program, steps=steps)


def _row_of(kernel: FusedKernel) -> Expr:
    """k (the row) of a flat full-space index idx."""
    idx = var("idx")
    if kernel.inner == 1:
        return Expr("idiv", (idx, const(kernel.rlen)))
    outer = Expr(
        "imul", (Expr("idiv", (idx, const(kernel.rlen * kernel.inner))), const(kernel.inner))
    )
    return Expr("iadd", (outer, Expr("imod", (idx, const(kernel.inner)))))


def _split_reduction(step: Step, kernel: FusedKernel) -> list[Step]:
    base = step.outs[0] if step.outs else kernel.name
    scratch = [f"{base}_s{j}" for j in range(len(kernel.reductions))]
    full = [i for i, s in enumerate(kernel.stores) if s.space == "full"]
    # stores of one value a row only (a loss's mean): the last partial program of a row stores
    # them, so no kernel follows the partials
    counter = "" if full else f"{base}_count"
    kinds = [r.kind for r in kernel.reductions] + (["count"] if counter else [])
    steps = _scratch([*scratch, *([counter] if counter else [])], kinds, kernel.rows)
    local = [f"s{j}" for j in range(len(scratch))]
    passes = kernel.passes()  # independent reductions share one read
    for p, members in enumerate(passes):
        last = members[-1] + 1
        earlier = {f"r{i}": _load(local[i], var("k"), "row") for i in range(members[0])}
        values = [
            Reduction(kernel.reductions[j].kind, substitute(kernel.reductions[j].value, earlier))
            for j in members
        ]
        part = PartialReduction(
            f"{kernel.name}_part{p}", kernel.rows, kernel.rlen, kernel.inner, values,
            [local[j] for j in members], [*kernel.inputs, *local[:last]],
        )  # fmt: skip
        inputs = [*step.inputs, *scratch[:last]]
        if counter and p == len(passes) - 1:
            steps.append(_finishing(step, kernel, part, inputs, counter))
        else:
            steps.append(Step("launch", [], kernel=part, inputs=inputs))
    if counter:
        return steps
    values, row_values = _row_values([kernel.stores[i].value for i in full])
    held = [f"{scratch[0]}_v{n}" for n in range(len(row_values))]
    scratch_args = (local, scratch)
    if row_values:
        shapes = [([kernel.rows], "float32")] * len(held)
        steps.append(_finish(step, kernel, "rowvals", scratch_args, row_values, held, shapes))
    for space, chosen in (("full", full), ("row", [i for i, s in enumerate(kernel.stores)
                                                   if s.space == "row"])):  # fmt: skip
        if not chosen:
            continue
        outs = [step.outs[kernel.outputs.index(kernel.stores[i].arg)] for i in chosen]
        shapes = [step.out_shapes[kernel.outputs.index(kernel.stores[i].arg)] for i in chosen]
        own = values if space == "full" else [kernel.stores[i].value for i in chosen]
        steps.append(_finish(step, kernel, space, scratch_args, own, outs, shapes, held))
    return steps


def _scratch(names: list[str], kinds: list[str], rows: int) -> list[Step]:
    """Scratch filled with each kind's identity; those of one fill share one allocation (a
    launch each otherwise), each a view of its part."""
    fills: dict[tuple[str, str], list[str]] = {}
    for name, kind in zip(names, kinds, strict=True):
        fills.setdefault((SCRATCH_INIT[kind], SCRATCH_DTYPE[kind]), []).append(name)
    steps = []
    for (init, dtype), group in fills.items():
        if len(group) == 1:
            steps.append(Step("scratch", group, args=init, out_shapes=[([rows], dtype)]))
            continue
        whole = f"{group[0]}_all"
        steps.append(Step("scratch", [whole], args=init, out_shapes=[([rows * len(group)], dtype)]))
        steps += [Step("view", [name], f"{whole}.narrow", f"0, {n * rows}, {rows}")
                  for n, name in enumerate(group)]  # fmt: skip
    return steps


def _finishing(step: Step, kernel: FusedKernel, part: PartialReduction, inputs: list[str],
               counter: str) -> Step:  # fmt: skip
    """`part` with the kernel's row stores done by each row's last program."""
    chosen = [s for s in kernel.stores if s.space == "row"]
    outs = [step.outs[kernel.outputs.index(s.arg)] for s in chosen]
    shapes = [step.out_shapes[kernel.outputs.index(s.arg)] for s in chosen]
    part.outputs = [f"out{n}" for n in range(len(chosen))]
    part.finish = [Store(f"out{n}", s.value, "row") for n, s in enumerate(chosen)]
    part.totals = [f"s{j}" for j in range(len(kernel.reductions))]
    part.counter = "count"
    part.inputs = [*part.inputs, "count"]
    return Step("launch", outs, kernel=part, inputs=[*inputs, counter], out_shapes=shapes)


def _finish(step: Step, kernel: FusedKernel, space: str, scratch_args, values: list[Expr],
            outs: list[str], shapes: list, held: list[str] = ()) -> Step:  # fmt: skip
    """A flat kernel over the full space (`space` "full") or the rows that stores `values`,
    reading each row's reductions back from the scratch and its row values from `held`."""
    local, scratch = scratch_args
    row = _row_of(kernel) if space == "full" else var("idx")
    names = {f"r{j}": _load(local[j], row, "full") for j in range(len(local))} | {"k": row}
    names |= {f"v{n}": _load(f"v{n}", row, "full") for n in range(len(held))}
    stores = [Store(f"out{n}", substitute(v, names, True), "full") for n, v in enumerate(values)]
    numel = kernel.numel if space == "full" else kernel.rows
    inputs = [*kernel.inputs, *local, *(f"v{n}" for n in range(len(held)))]
    finish = FusedKernel(f"{kernel.name}_{space}", numel, 1, 1, inputs,
                         [f"out{n}" for n in range(len(values))], [], stores, kernel.kind)  # fmt: skip
    return Step("launch", outs, kernel=finish, inputs=[*step.inputs, *scratch, *held],
                out_shapes=shapes)  # fmt: skip


def _row_values(values: list[Expr]) -> tuple[list[Expr], list[Expr]]:
    """`values` with each largest subexpression that has one value per row and uses a
    reduction (a norm's mean, its 1/std) replaced by var("vN"); those subexpressions. The flat
    kernel then reads them, computed once a row, instead of computing them at every element."""
    found: dict[Expr, Expr] = {}

    def visit(e: Expr) -> Expr:
        if e.op in ("const", "var", "load"):
            return e
        held = row_constant(e) and e.op not in NOT_FLOAT  # the scratch holds floats
        if held and any(n.op == "var" and n.attr[0] == "r" for n in walk(e)):
            return found.setdefault(e, var(f"v{len(found)}"))
        return Expr(e.op, tuple(visit(a) for a in e.args), e.attr)

    rewritten = [visit(v) for v in values]
    return rewritten, list(found)


def _split_gemm(step: Step, kernel: GemmKernel, parts: int) -> list[Step]:
    scratch = f"{step.outs[0]}_acc"
    numel = kernel.batch * kernel.m * kernel.n
    partial = GemmKernel(
        f"{kernel.name}_splitk", kernel.batch, kernel.m, kernel.n, kernel.k, kernel.a, kernel.b,
        [*kernel.inputs, "acc_out"], [], [], kernel.kind, split_k=parts,
    )  # fmt: skip
    names = {"acc": _load("acc_in", var("idx"), "full")}
    stores = [Store(s.arg, substitute(s.value, names, True), "full") for s in kernel.stores]
    epilogue = FusedKernel(f"{kernel.name}_epilogue", numel, 1, 1, [*kernel.inputs, "acc_in"],
                           list(kernel.outputs), [], stores, "pointwise")  # fmt: skip
    return [
        Step("scratch", [scratch], args="0.0", out_shapes=[([numel], "float32")]),
        Step("launch", [], kernel=partial, inputs=[*step.inputs, scratch]),
        Step(
            "launch",
            step.outs,
            kernel=epilogue,
            inputs=[*step.inputs, scratch],
            out_shapes=step.out_shapes,
        ),  # fmt: skip
    ]


def _load(tensor: str, offset: Expr, space: str) -> Expr:
    return Expr("load", attr=Load(tensor, offset, space))
