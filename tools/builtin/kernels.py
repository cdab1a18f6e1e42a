"""What a generated kernel computes, independent of the DSL that prints it.

A `FusedKernel` covers pointwise chains, reductions, the softmax family and normalisations:
its index space is [outer, rlen, inner] (rlen is the reduced extent, 1 when nothing is
reduced); a *row* is one (outer, inner) pair, numbered `k = o * inner + i`, and a full-space
element is numbered `idx = o * rlen * inner + r * inner + i`. Expressions use var("idx") and
var("k") for those, var("rN") for the N-th reduction's row value, and load kernel arguments
through `Load`. A `GemmKernel` is a (batched) matrix product with an epilogue over var("acc")
and var("idx") = flat index of the [batch, m, n] output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kernelgraph.tools.builtin.expr import Expr, loads, walk


@dataclass
class Store:
    arg: str  # the output kernel argument
    value: Expr
    space: str  # "full" or "row"; stored at idx or k (outputs are contiguous)


@dataclass
class Reduction:
    kind: str  # sum max min prod argmax argmin
    value: Expr  # full-space argument (may use earlier reductions' rN)


@dataclass
class FusedKernel:
    name: str
    outer: int
    rlen: int
    inner: int
    inputs: list[str]
    outputs: list[str]
    reductions: list[Reduction] = field(default_factory=list)
    stores: list[Store] = field(default_factory=list)
    kind: str = "pointwise"  # pointwise | reduction | softmax | norm: what the sketch calls it
    integer_outputs: frozenset[str] = frozenset()  # e.g. a step counter: not stored as a float

    @property
    def rows(self) -> int:
        return self.outer * self.inner

    @property
    def numel(self) -> int:
        return self.outer * self.rlen * self.inner

    def describe(self) -> str:
        if self.is_pointwise():
            return f"{self.name}: fused pointwise over {self.numel} elements ({len(self.stores)} output(s))"
        kinds = ", ".join(r.kind for r in self.reductions)
        return (f"{self.name}: {self.kind} over {self.rows} rows of {self.rlen} (stride {self.inner}); "
                f"reductions {kinds}; pointwise prologue/epilogue fused")  # fmt: skip

    def axes(self) -> str:
        return f"{self.name}: " + (
            "elements" if self.is_pointwise() else "rows (reduced axis in-program)"
        )

    def grid(self) -> str:
        return "cdiv(numel, BLOCK)" if self.is_pointwise() else "cdiv(rows, BLOCK_K)"

    def pseudo(self) -> str:
        if self.is_pointwise():
            return f"{self.name}: out[i] = f(inputs at i, broadcast by strides)"
        steps = "; ".join(f"r{j} = {r.kind}_r(...)" for j, r in enumerate(self.reductions))
        return f"{self.name}: per row: {steps}; store row/full outputs"

    def is_pointwise(self) -> bool:
        return not self.reductions and all(s.space == "full" for s in self.stores)

    def full_loads(self):
        return [ld for s in self.stores for ld in loads(s.value) if ld.space == "full"]

    def passes(self, folded: dict[int, int] | None = None) -> list[list[int]]:
        """Reductions grouped into passes over a row: one joins the current pass unless it uses
        a result of that pass (a max and a sum of x share one read; softmax's sum needs the
        max). `folded` maps a reduction to the one whose pass also computes it (online
        softmax's sum to its max): it joins no pass itself, but its result is that pass's."""
        groups: list[list[int]] = []
        results: list[set[str]] = []
        for j, reduction in enumerate(self.reductions):
            if folded and j in folded:
                home = next(n for n, members in enumerate(groups) if folded[j] in members)
                results[home].add(f"r{j}")
                continue
            used = {n.attr for n in walk(reduction.value) if n.op == "var"}
            if groups and not used & results[-1]:
                groups[-1].append(j)
                results[-1].add(f"r{j}")
            else:
                groups.append([j])
                results.append({f"r{j}"})
        return groups

    def online_pairs(self) -> dict[int, tuple[int, Expr]]:
        """Reductions that can share one pass with an earlier max (online softmax): for each
        max index i whose value E is also the E of a later `sum(exp(E - S(r_i)))` j, where S
        depends on r_i alone, map i -> (j, S). Such a sum rescales by exp(S(old) - S(new))
        whenever the running max grows, so a loop reads the row once for both."""
        pairs: dict[int, tuple[int, Expr]] = {}
        for j, sum_ in enumerate(self.reductions):
            value = sum_.value
            if sum_.kind != "sum" or value.op != "exp" or value.args[0].op != "sub":
                continue
            e, shift = value.args[0].args
            i = self.earlier_over(j, "max", e, shift, pairs)
            if i is not None:
                pairs[i] = (j, shift)
        return pairs

    def earlier_over(self, j: int, kind: str, e: Expr, shift: Expr, taken) -> int | None:
        """The first reduction before j, of `kind` over `e` and not in `taken`, that `shift`
        is a function of alone (no other row value, no load)."""
        used = {n.attr for n in walk(shift) if n.op == "var"}
        for i, reduction in enumerate(self.reductions[:j]):
            if i in taken or reduction.kind != kind or reduction.value != e:
                continue
            if used == {f"r{i}"} and not loads(shift):
                return i
        return None


@dataclass
class PartialReduction:
    """One pass of a FusedKernel's reductions split across programs: each program reduces a
    chunk of one row for every reduction of the pass (sum, max or min) and combines each into
    its `targets` entry (a scratch input) with an atomic."""

    name: str
    rows: int
    rlen: int
    inner: int
    reductions: list[Reduction]
    targets: list[str]
    inputs: list[str]
    outputs: list[str] = field(default_factory=list)
    kind: str = "split reduction"
    # the last pass of a kernel whose stores are all one value a row: the last program of a
    # row to add its partials (counted in `counter`) stores them, reading r_j from totals[j]
    finish: list[Store] = field(default_factory=list)
    totals: list[str] = field(default_factory=list)
    counter: str = ""

    @property
    def numel(self) -> int:
        return self.rows * self.rlen

    def describe(self) -> str:
        kinds = ", ".join(r.kind for r in self.reductions)
        return (f"{self.name}: {kinds} over {self.rows} row(s) of {self.rlen}, chunks spread "
                f"over programs and combined with atomics")  # fmt: skip

    def axes(self) -> str:
        return f"{self.name}: row chunks, rows"

    def grid(self) -> str:
        return "(cdiv(rlen, BLOCK_R), rows)"

    def pseudo(self) -> str:
        steps = "; ".join(f"atomic_{r.kind}({t}[row], {r.kind}(chunk))"
                          for r, t in zip(self.reductions, self.targets, strict=True))  # fmt: skip
        return f"{self.name}: {steps}"


@dataclass
class Operand:
    arg: str
    strides: tuple[int, int, int]  # (batch, rows, cols) in elements; batch 0 when shared


@dataclass
class GemmKernel:
    name: str
    batch: int
    m: int
    n: int
    k: int
    a: Operand  # [batch, m, k]
    b: Operand  # [batch, k, n]
    inputs: list[str]
    outputs: list[str]
    stores: list[Store] = field(default_factory=list)
    kind: str = "gemm"
    split_k: int = 1  # > 1: programs share K and add into inputs[-1] (fp32 scratch); no stores

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k

    def span(self, side: str) -> int:
        """Elements from operand `side`'s ("a" or "b") first to its last one the kernel reads,
        gaps included."""
        operand, sizes = {"a": (self.a, (self.m, self.k)), "b": (self.b, (self.k, self.n))}[side]
        sizes = (self.batch, *sizes)
        return 1 + sum(
            (size - 1) * stride for size, stride in zip(sizes, operand.strides, strict=True)
        )

    def describe(self) -> str:
        batch = f"{self.batch} x " if self.batch > 1 else ""
        return f"{self.name}: GEMM {batch}[{self.m}x{self.k}] @ [{self.k}x{self.n}] with a fused epilogue"

    def axes(self) -> str:
        return f"{self.name}: batch, M tiles, N tiles"

    def grid(self) -> str:
        return "(cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) grouped by GROUP_M, batch)"

    def pseudo(self) -> str:
        return f"{self.name}: acc = sum_k A[m,k] B[k,n] (fp32); out = epilogue(acc)"


def family_of(table: dict[type, Any], kernel: Any, backend: str) -> Any:
    """A backend's entry for the kernel's type (one table a backend, one entry a type)."""
    if type(kernel) not in table:
        raise KeyError(f"the {backend} backend has no kernel family for {type(kernel).__name__}")
    return table[type(kernel)]


def next_pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def numel(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1
