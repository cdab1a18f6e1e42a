"""C++ (OpenMP, CPU) source of the builtin's row kernels: reductions, softmax family, norms.

A FusedKernel's index space is [outer, rlen, inner] (tools/builtin/kernels.py). Reductions are
grouped into sweeps over r (one sweep computes every reduction that does not need another of
the same sweep); then row results are stored, then a last sweep stores the full-space results.
What does not vary along r is hoisted out of the sweeps (per-row loads, 1 / sum, rsqrt(var)).

- Contiguous rows (inner == 1): threads share the rows; each sweep is an `omp simd` loop over
  r with scalar accumulators (`reduction` clauses). The last reduction sweep keeps expensive
  subexpressions that the stores need again (softmax's exp) in a row buffer.
- Strided rows (inner > 1): threads share (outer, chunk of WIDTH rows); a sweep runs r outside
  and the chunk's contiguous rows inside, with per-row accumulator arrays, so memory is read
  in order.
"""

from __future__ import annotations

import dataclasses

from kernelgraph.tools.builtin.cpp_emit import (
    MAX_WIDTH,
    MIN_ROW,
    CppSyntax,
    fused_dynamic,
    indent,
    index_type,
    loop,
    print_stores,
    signature,
    split_index,
    split_length,
    uses,
)  # fmt: skip
from kernelgraph.tools.builtin.expr import Expr, call, const, never_negative, var, walk
from kernelgraph.tools.builtin.kernels import FusedKernel, Reduction, Store
from kernelgraph.tools.builtin.printer import Printer

INIT = {"sum": "0.0f", "prod": "1.0f", "max": "-INFINITY", "min": "INFINITY"}
CLAUSE = {"sum": "+", "prod": "*", "max": "max", "min": "min"}
COMBINE = {"sum": "{a} += {v};", "prod": "{a} *= {v};", "max": "{a} = {v} > {a} ? {v} : {a};",
           "min": "{a} = {v} < {a} ? {v} : {a};"}  # fmt: skip
EXPENSIVE = frozenset("exp log tanh sigmoid erf pow sqrt rsqrt sin cos log1p expm1 div".split())
# static: thread t takes the t-th block of rows, as torch's own parallel_for does, so rows the
# op before wrote (in the same OpenMP team) are still in this core's cache. With guided, the
# README's softmax (512 x 1024) took 0.44 ms after an input copy, 0.35 with static (2 cores).
PARALLEL = "#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)"
WIDE_ROWS, WIDE_RLEN = 8, 1 << 15  # fewer, longer rows: threads share each row's sweeps
DOUBLE_SUM_RLEN = 1024  # longer sums accumulate in double: fp32 drifts past 1e-4 at 8192
# ... unless no term is negative: nothing cancels, and fp32 errs by at most (terms a lane) x
# 6e-8 relative, 3e-5 at 4096 over 8 lanes. The README's softmax (rows of 1024) summed in
# double took 0.64 ms a thread, in float 0.49 (a 2-core Xeon).
NONNEGATIVE_FLOAT_RLEN = 4096
MAX_CACHED_ROW = 8192  # floats of row buffer per cached subexpression (on the thread's stack)


def varies(e: Expr, along: tuple[str, ...] = ("idx", "r", "rb", "rr")) -> bool:
    return any(n.op == "var" and n.attr in along for n in walk(e))


class Hoister:
    """Replaces maximal subexpressions that do not vary along r by variables hN."""

    def __init__(self) -> None:
        self.table: dict[Expr, Expr] = {}
        self.done: set[str] = set()

    def __call__(self, e: Expr) -> Expr:
        if e.op in ("const", "var"):
            return e
        if not varies(e):
            return self.table.setdefault(e, var(f"h{len(self.table)}"))
        if e.op == "load":
            return e
        if e.op == "div" and not varies(e.args[1]):  # one reciprocal per row, then multiply
            return call("mul", self(e.args[0]), self(call("div", const(1.0), e.args[1])))
        return Expr(e.op, tuple(self(a) for a in e.args), e.attr)

    def ready(self, defined: set[str]) -> list[tuple[str, Expr]]:
        """Hoisted values not emitted yet whose row results are all computed."""
        out = [(h.attr, e) for e, h in self.table.items() if h.attr not in self.done
               and {n.attr for n in walk(e) if n.op == "var"} - {"k"} <= defined]  # fmt: skip
        self.done.update(h for h, _ in out)
        return out


def _needs_double(value: Expr, rlen: int) -> bool:
    """Whether a row sum of `value` over rlen terms accumulates in double."""
    if rlen < DOUBLE_SUM_RLEN:
        return False
    return rlen > NONNEGATIVE_FLOAT_RLEN or not never_negative(value)


def _combine(j: int, kind: str, v: str, at: str, acc: str = "") -> list[str]:
    if kind.startswith("arg"):
        op = ">" if kind == "argmax" else "<"
        b, r = f"b{j}{at}", f"r{j}{at}"
        return [f"const bool better{j} = {v} {op} {b} || ({v} != {v} && {b} == {b});",
                f"{b} = better{j} ? {v} : {b};", f"{r} = better{j} ? r : {r};"]  # fmt: skip
    return [COMBINE[kind].format(a=acc or f"r{j}{at}", v=v)]


def _shared(values: list[Expr], stores: list[Expr]) -> list[Expr]:
    """Expensive r-varying subexpressions of the stores that a sweep computes anyway."""
    inside = {n for v in values for n in walk(v)}
    found: list[Expr] = []

    def visit(e: Expr) -> None:
        if e in inside and varies(e) and any(n.op in EXPENSIVE for n in walk(e)):
            if e not in found:
                found.append(e)
            return
        for a in e.args:
            visit(a)

    for e in stores:
        visit(e)
    return found[:2]


def _exprs(kernel: FusedKernel) -> list[Expr]:
    return [red.value for red in kernel.reductions] + [s.value for s in kernel.stores]


def _substitute(e: Expr, mapping: dict[Expr, Expr]) -> Expr:
    if e in mapping:
        return mapping[e]
    return Expr(e.op, tuple(_substitute(a, mapping) for a in e.args), e.attr) if e.args else e


class RowKernel:
    def __init__(self, kernel: FusedKernel) -> None:
        if kernel.inner == 1:  # per-row operands become row values (hoisted) where they can
            split = lambda e: split_index(e, kernel.rlen)  # noqa: E731
            kernel = dataclasses.replace(
                kernel,
                reductions=[Reduction(red.kind, split(red.value)) for red in kernel.reductions],
                stores=[Store(s.arg, split(s.value), s.space) for s in kernel.stores],
            )
        self.kernel, self.strided = kernel, kernel.inner > 1
        self.wide = not self.strided and kernel.rows < WIDE_ROWS and kernel.rlen >= WIDE_RLEN
        sub = 0 if self.strided else split_length(_exprs(kernel), "r")
        self.sub = sub if MIN_ROW <= sub < kernel.rlen else 0
        if self.sub:  # r = rb * sub + rr: what varies with rb only is computed once per rb
            split = lambda e: split_index(e, self.sub, ("r", "rb", "rr"))  # noqa: E731
            kernel.reductions = [Reduction(red.kind, split(red.value)) for red in kernel.reductions]
            kernel.stores = [Store(s.arg, split(s.value), s.space) for s in kernel.stores]
        limits = {"idx": kernel.numel, "k": kernel.rows, "r": kernel.rlen, "rb": kernel.rlen,
                  "rr": kernel.rlen}  # fmt: skip
        self.ix = index_type(kernel, limits, _exprs(kernel))
        self.dynamic = fused_dynamic(kernel)
        self.at = "[ii]" if self.strided else ""
        self.syntax, self.hoist = CppSyntax(), Hoister()
        self.names: dict[str, str] = {}
        self.row = Printer(self.syntax, self.names, prefix="w")  # row scope (inner == 1)
        self.body: list[str] = []

    def printer(self, prefix: str) -> Printer:
        return Printer(self.syntax, dict(self.names), prefix=prefix)

    def declare(self, lines: list[str], **values: str) -> list[str]:
        """`lines` preceded by the index variables they use (later ones may use earlier ones)."""
        decls: list[str] = []
        for name, value in reversed(values.items()):
            if any(uses(line, name) for line in lines + decls):
                decls.insert(0, f"const {self.ix} {name} = {value};")
        return decls + lines

    def ii_loop(self, lines: list[str], simd: bool = True) -> list[str]:
        head = f"for ({self.ix} ii = 0; ii < w; ++ii)"
        return loop(head, self.declare(lines, k="k0 + ii"), "#pragma omp simd" if simd else None)

    def r_loop(self, lines: list[str], clauses: list[str] | None, pre: list[str]) -> list[str]:
        """A sweep over r; `clauses`: its reduction clauses, None when it cannot be simd (an
        argmax). Wide kernels (few long rows) share each sweep among the threads."""
        k, ix = self.kernel, self.ix
        simd = None if clauses is None else " ".join(["#pragma omp simd", *clauses])
        shared = None
        if self.wide and clauses is not None:
            shared = " ".join([PARALLEL, *clauses])
        if self.sub:
            inner = loop(f"for ({ix} rr = 0; rr < {self.sub}; ++rr)",
                         self.declare(lines, r=f"rb * {self.sub} + rr", idx="base + r"), simd)  # fmt: skip
            return loop(f"for ({ix} rb = 0; rb < {k.rlen // self.sub}; ++rb)", pre + inner, shared)
        if not self.strided:
            pragma = shared.replace(" for ", " for simd ") if shared else simd
            return loop(f"for ({ix} r = 0; r < {k.rlen}; ++r)",
                        self.declare(lines, idx="base + r"), pragma)  # fmt: skip
        inner = loop(f"for ({ix} ii = 0; ii < w; ++ii)",
                     self.declare(lines, k="k0 + ii", idx="base + ii"), "#pragma omp simd")  # fmt: skip
        base = f"const {ix} base = o * {k.rlen * k.inner} + r * {k.inner} + i0;"
        return loop(f"for ({ix} r = 0; r < {k.rlen}; ++r)", [base, *inner])

    def sub_hoist(self, exprs: list[Expr], prefix: str) -> tuple[list[Expr], list[str]]:
        """Subexpressions that vary with rb only, replaced by values computed once per rb."""
        if not self.sub:
            return exprs, []
        table: dict[Expr, Expr] = {}

        def visit(e: Expr) -> Expr:
            if e.op in ("const", "var"):
                return e
            if not varies(e, ("idx", "r", "rr")):
                return table.setdefault(e, var(f"{prefix}{len(table)}"))
            return e if e.op == "load" else Expr(e.op, tuple(visit(a) for a in e.args), e.attr)

        out = [visit(e) for e in exprs]
        printer, lines = self.printer(prefix + "_"), []
        for e, v in table.items():
            self.names[v.attr] = printer.value(e)
            lines += printer.take()
        return out, lines

    def emit_hoisted(self) -> None:
        ready = self.hoist.ready(set(self.names))
        if self.strided and ready:
            printer, lines = self.printer("w"), []
            for h, e in ready:
                value = printer.value(e)
                lines += printer.take() + [f"{h}[ii] = {value};"]
            self.body += [f"float {h}[{MAX_WIDTH}];" for h, _ in ready] + self.ii_loop(lines)
        for h, e in ready:
            if self.strided:
                self.names[h] = f"{h}[ii]"
            else:
                self.names[h] = self.row.value(e)
                self.body += self.row.take()

    def sweep(self, p: int, members: list[int], values: list[Expr], cached: list[Expr]) -> None:
        size = f"[{MAX_WIDTH}]" if self.strided else ""
        both, pre = self.sub_hoist(values + cached, f"s{p}")
        values, cached = both[: len(values)], both[len(values) :]
        printer, lines, clauses, decls, starts = self.printer(f"p{p}_"), [], [], [], []
        after: list[str] = []
        for j, value in zip(members, values, strict=True):
            kind = self.kernel.reductions[j].kind
            spelled = printer.value(value)
            long_sum = kind == "sum" and _needs_double(value, self.kernel.rlen)
            acc = f"r{j}d" if long_sum and not self.strided else ""
            lines += printer.take() + _combine(j, kind, spelled, self.at, acc)
            if kind.startswith("arg"):
                accs = [("float", f"b{j}", INIT[kind[3:]]), ("int64_t", f"r{j}", "0")]
            elif long_sum and self.strided:
                accs = [("double", f"r{j}", "0.0")]
            elif long_sum:
                accs = [("double", acc, "0.0")]
                clauses.append(f"reduction(+:{acc})")
                after.append(f"const float r{j} = static_cast<float>({acc});")
            else:
                accs = [("float", f"r{j}", INIT[kind])]
                clauses.append(f"reduction({CLAUSE[kind]}:r{j})")
            decls += [f"{ctype} {name}{size};" for ctype, name, _ in accs]
            starts += [f"{name}{self.at} = {init};" for _, name, init in accs]
        for i, e in enumerate(cached):
            decls.append(f"float c{i}[{self.kernel.rlen}];")
            value = printer.value(e)
            lines += printer.take() + [f"c{i}[r] = {value};"]
        self.body += decls + (self.ii_loop(starts, False) if self.strided else starts)
        # argmax/argmin: no reduction clause for (value, index) pairs, so no simd sweep
        self.body += self.r_loop(lines, clauses if len(clauses) == len(members) else None, pre)
        self.body += after
        self.names.update({f"r{j}": f"r{j}{self.at}" for j in members})

    def source(self) -> str:
        k, hoist = self.kernel, self.hoist
        groups = k.passes()
        fulls = [s for s in k.stores if s.space == "full"]
        can_cache = fulls and not (self.strided or self.wide) and k.rlen <= MAX_CACHED_ROW
        cached: list[Expr] = []
        for p, members in enumerate(groups):
            values = [hoist(k.reductions[j].value) for j in members]
            if can_cache and p == len(groups) - 1:  # hoist the stores now to compare them
                fulls = [Store(s.arg, hoist(s.value), s.space) for s in fulls]
                cached = _shared(values, [s.value for s in fulls])
            self.emit_hoisted()
            self.sweep(p, members, values, cached)
        if not (can_cache and groups):
            fulls = [Store(s.arg, hoist(s.value), s.space) for s in fulls]
        self.emit_hoisted()
        mapping = {e: var(f"c{i}") for i, e in enumerate(cached)}
        self.names.update({f"c{i}": f"c{i}[r]" for i in range(len(cached))})
        fulls = [Store(s.arg, _substitute(s.value, mapping), s.space) for s in fulls]
        rows = [s for s in k.stores if s.space == "row"]
        if rows and self.strided:
            lines = print_stores(self.printer("w"), rows, "k0 + ii", self.dynamic)
            self.body += self.ii_loop(lines, False)
        elif rows:
            self.body += print_stores(self.row, rows, "k", self.dynamic)
        if fulls:
            values, pre = self.sub_hoist([s.value for s in fulls], "sf")
            fulls = [Store(s.arg, v, s.space) for s, v in zip(fulls, values, strict=True)]
            lines = print_stores(self.printer("f"), fulls, "idx", self.dynamic)
            self.body += self.r_loop(lines, [], pre)
        return self.wrap()

    def wrap(self) -> str:
        k, ix = self.kernel, self.ix
        pragma = None if self.wide else PARALLEL
        params = ["threads", "WIDTH"] if self.strided else ["threads"]
        head = [
            signature(k, self.dynamic, params) + " {",
            "    const int nt = kg_threads(threads);",
        ]
        if not self.strided:
            body = [f"const {ix} base = k * {k.rlen};", *self.body]
            rows = loop(f"for ({ix} k = 0; k < {k.rows}; ++k)", body, pragma)
            # AVX-512's vectors where the machine has them (cpp_backend.py's HELPERS)
            return "\n".join(["KG_WIDE_VECTORS_BEGIN", *head, *indent(rows), "}",
                              "KG_WIDE_VECTORS_END"])  # fmt: skip
        head += [f"    const {ix} W = static_cast<{ix}>(std::min<int64_t>(WIDTH < 1 ? 1 : WIDTH,"
                 f" {MAX_WIDTH}));", f"    const {ix} chunks = ({k.inner} + W - 1) / W;"]  # fmt: skip
        chunk = [f"const {ix} i0 = c * W, w = std::min<{ix}>(W, {k.inner} - i0);",
                 f"const {ix} k0 = o * {k.inner} + i0;", *self.body]  # fmt: skip
        outer = loop(f"for ({ix} c = 0; c < chunks; ++c)", chunk)
        pragma = PARALLEL.replace("for ", "for collapse(2) ")
        return "\n".join([*head, *indent(loop(f"for ({ix} o = 0; o < {k.outer}; ++o)", outer,
                                              pragma)), "}"])  # fmt: skip


def row_source(kernel: FusedKernel) -> str:
    return RowKernel(kernel).source()
