"""A 2-D tile epilogue's operand offsets, spelled from the tile's own coordinates.

A convolution's epilogue reads its other operands at offsets of the flat output index `idx`:
its bias at `(idx // positions) % channels`. Printed so, each element of a
128 x 128 tile pays an integer division and a load. But `idx` is a mixed-radix number whose
digits are the tile's coordinates (batch, channel, position), so such an offset is often one
coordinate, or a sum of a few: a bias then loads once per column, as a [1, BLOCK_N] vector.
On level2/4's convolution that took ptxas from 186 to 128 registers and 3760 to 2992 SASS
instructions (sm_90), which lets two programs share an SM. GEMMs do not use it: it made none
faster and three 5% slower (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelgraph.tools.builtin.expr import Expr

INT32_MAX = 2**31 - 1

# a term coef * digits[i:j] of idx: sum over k of digit_k * coef * (product of radices after k)
Term = tuple[int, int, int]


@dataclass(frozen=True)
class Digit:
    text: str  # its spelling in the kernel, shaped for the tile: "co[None, :]"
    radix: int  # its values run from 0 to radix - 1
    axis: str  # "row", "col", or "" for one value per program


@dataclass(frozen=True)
class TileOffsets:
    """idx = the digits in mixed radix, most significant first; the mask of a load that varies
    along rows only, along columns only, or along both (`full`)."""

    digits: tuple[Digit, ...]
    row_mask: str
    col_mask: str
    full_mask: str = "mask"

    def spell(self, offset: Expr) -> tuple[str, str] | None:
        """(offset, mask) in the tile's coordinates, or None where the offset is not a sum of
        digit runs of idx (the caller then prints it from idx)."""
        found = self._value(offset)
        if found is None:
            return None
        terms, constant = found
        parts, axes, largest = [], set(), constant
        for coef, i, j in terms:
            for k in range(i, j):
                weight = coef * math.prod(d.radix for d in self.digits[k + 1 : j])
                digit = self.digits[k]
                if digit.radix == 1 or weight == 0:
                    continue
                parts.append(digit.text if weight == 1 else f"{digit.text} * {weight}")
                axes.add(digit.axis)
                largest += abs(weight) * (digit.radix - 1)
        if largest > INT32_MAX:
            return None  # the caller's idx is int64 there; keep its arithmetic
        if constant or not parts:
            parts.append(str(constant))
        axes.discard("")
        mask = {frozenset({"row"}): self.row_mask, frozenset({"col"}): self.col_mask}
        return " + ".join(parts), mask.get(frozenset(axes), self.full_mask)

    def _value(self, e: Expr) -> tuple[list[Term], int] | None:
        if e.op == "var" and e.attr == "idx":
            return [(1, 0, len(self.digits))], 0
        if e.op == "const":
            return [], int(e.attr)
        if e.op not in ("iadd", "imul", "idiv", "imod"):
            return None
        left, right = (self._value(a) for a in e.args)
        if left is None or right is None:
            return None
        if e.op == "iadd":
            return left[0] + right[0], left[1] + right[1]
        if e.op == "imul":
            if not left[0] or not right[0]:
                (terms, c), scale = (right, left[1]) if not left[0] else (left, right[1])
                return [(coef * scale, i, j) for coef, i, j in terms], c * scale
            return None
        if right[0] or len(left[0]) != 1 or left[1] or left[0][0][0] != 1 or right[1] <= 0:
            return None  # only one run of digits, divided by a positive constant
        _, i, j = left[0][0]
        cut = self._cut(i, j, right[1])
        if cut is None:
            return None
        if e.op == "idiv":
            return ([(1, i, cut)] if cut > i else []), 0
        return ([(1, cut, j)] if j > cut else []), 0

    def _cut(self, i: int, j: int, divisor: int) -> int | None:
        """m with divisor = the product of the radices of digits[m:j]: then digits[i:j] //
        divisor = digits[i:m] and % divisor = digits[m:j]. i where the divisor exceeds them."""
        if divisor >= math.prod(d.radix for d in self.digits[i:j]):
            return i
        for m in range(j, i - 1, -1):
            if math.prod(d.radix for d in self.digits[m:j]) == divisor:
                return m
        return None
