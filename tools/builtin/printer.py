"""Printing expressions as straight-line code, one temporary per distinct subexpression.

A DSL supplies `Syntax`: how to spell each primitive, a constant, a load and an assignment.
The printer shares common subexpressions (softmax's exp(x - max) is computed once) and keeps
the statements in dependency order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kernelgraph.tools.builtin.expr import INDEX_OPS, Expr, Load


class Syntax(Protocol):
    def primitive(self, op: str, args: list[str]) -> str: ...

    def constant(self, value: float | int | bool) -> str: ...

    def load(self, load: Load, offset: str, mask: str | None = None) -> str: ...

    def assign(self, name: str, value: str) -> str: ...

    index_symbols: dict[str, str]  # idiv imod imul iadd

    def index_abs(self, x: str) -> str: ...  # iabs

    def index_of(self, value: str) -> str: ...  # ival: a loaded value as a position


def operator_or_call(op: str, args: list[str], binary: dict, calls: dict) -> str | None:
    """`(a OP b)` for an infix operator, `f(a, ...)` for a function, None for neither: the part
    of spelling a primitive that every C-like DSL shares."""
    if op in binary:
        return f"({args[0]} {binary[op]} {args[1]})"
    if op in calls:
        return f"{calls[op]}({', '.join(args)})"
    return None


@dataclass
class Printer:
    syntax: Syntax
    names: dict[str, str] = field(default_factory=dict)  # var name -> spelling
    prefix: str = "t"
    lines: list[str] = field(default_factory=list)
    # a kernel's own spelling of a load's offset and mask (tools/builtin/tile_offsets.py)
    offsets: Callable[[Expr], tuple[str, str] | None] | None = None
    _done: dict[Expr, str] = field(default_factory=dict)

    def value(self, e: Expr) -> str:
        """The spelling of `e`, emitting the statements it needs first."""
        if e in self._done:
            return self._done[e]
        if e.op == "const":
            return self.syntax.constant(e.attr)
        if e.op == "var":
            return self.names.get(e.attr, e.attr)
        if e.op in INDEX_OPS:  # an element's position used as a value (triu, tril)
            return self.index(e)
        if e.op == "load":
            spelled = self.offsets(e.attr.offset) if self.offsets else None
            if spelled is None:
                text = self.syntax.load(e.attr, self.index(e.attr.offset))
            else:
                text = self.syntax.load(e.attr, *spelled)
        else:
            text = self.syntax.primitive(e.op, [self.value(a) for a in e.args])
        name = f"{self.prefix}{len(self._done)}"
        self.lines.append(self.syntax.assign(name, text))
        self._done[e] = name
        return name

    def index(self, e: Expr) -> str:
        """Integer offset arithmetic, inline (cheap, and constant divisors fold)."""
        if e.op == "const":
            return str(int(e.attr))
        if e.op == "var":
            return self.names.get(e.attr, e.attr)
        if e.op == "iabs":
            return self.syntax.index_abs(self.index(e.args[0]))
        if e.op == "ival":
            return self.syntax.index_of(self.value(e.args[0]))
        a, b = (self.index(x) for x in e.args)
        symbol = self.syntax.index_symbols[e.op]
        return f"({a} {symbol} {b})"

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines
