"""The data a group of traced ops is built from and into (groups.py builds it): the group's
index space, the program's view of it, and the kernel that comes out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.expr import Expr, _merge
from kernelgraph.tools.builtin.kernels import FusedKernel, GemmKernel, numel
from kernelgraph.tools.builtin.pooling import PoolKernel
from kernelgraph.tools.builtin.values import Value

# Views that keep row-major element order when the element count does not change.
RESHAPES = frozenset(
    "view _unsafe_view reshape _reshape_alias squeeze unsqueeze flatten unflatten alias detach "
    "lift_fresh".split()
)
VECTOR_PRODUCTS = frozenset({"mv", "addmv", "dot"})  # a 1-D B: GEMMs with N = 1
GEMMS = frozenset({"mm", "addmm", "bmm", "baddbmm"}) | VECTOR_PRODUCTS


def op_name(op: dict[str, Any]) -> str:
    return op["op"].split(".", 1)[1]


@dataclass
class InGroup:
    expr: Expr
    space: str  # "full" | "row" | "acc"
    shape: list[int]


@dataclass
class Space:
    outer: int
    rlen: int
    inner: int

    @property
    def full(self) -> int:
        return self.outer * self.rlen * self.inner

    @property
    def rows(self) -> int:
        return self.outer * self.inner

    def row_pattern(self) -> list[tuple[int, int]]:
        """How a row value broadcast over the full space is addressed: k = o * inner + i."""
        return _merge([self.outer, self.rlen, self.inner], [self.inner, 0, 1])


def collapse(shape: list[int], dims: list[int]) -> Space:
    """[outer, rlen, inner] for reducing `dims` of `shape`; size-1 dims do not count."""
    reduced = [d for d in dims if shape[d] != 1]
    if not reduced:
        return Space(numel(shape), 1, 1)
    if reduced != list(range(reduced[0], reduced[-1] + 1)):
        if any(shape[d] != 1 for d in range(reduced[0], reduced[-1] + 1) if d not in reduced):
            raise Unsupported("a reduction over non-adjacent dims", f"dims {dims} of {shape}")
    first, last = reduced[0], reduced[-1]
    return Space(numel(shape[:first]), numel(shape[first : last + 1]), numel(shape[last + 1 :]))


@dataclass
class GroupContext:
    """What the builder needs from the program: op list, where values live, who reads them."""

    ops: list[dict[str, Any]]
    external: Callable[[dict], Value]  # a ref's forward tensor (views applied), for loading
    # ref -> (producer key, views as (op index, output slot))
    chain: Callable[[dict], tuple[tuple[str, int], list[tuple[int, int]]]]
    needed_outside: Callable[[tuple[str, int], set[int]], bool]
    out_dtype: Callable[[int, int], str]


@dataclass
class GroupResult:
    kernel: FusedKernel | GemmKernel | PoolKernel
    inputs: list[Value] = field(default_factory=list)
    outputs: list[tuple[tuple[str, int], list[int], str]] = field(default_factory=list)
