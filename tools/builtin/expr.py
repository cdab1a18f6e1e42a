"""The expression language of generated kernels: a small tree of primitive ops.

ATen ops lower into these (tools/builtin/lowering.py, reductions.py); each DSL prints them
(tools/builtin/triton_print.py, cpp_print.py). Values are computed in fp32 whatever the tensors'
dtype; comparisons give booleans; index arithmetic is integer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Primitive ops and their arity. Printers must know every one of them.
UNARY = frozenset(
    "neg exp log sqrt rsqrt abs erf tanh floor ceil round trunc sin cos log1p expm1 not isnan "
    "to_float to_bool sigmoid atan".split()
)
BINARY = frozenset("add sub mul div max min pow lt le gt ge eq ne and or fmod".split())
TERNARY = frozenset({"where"})
# integer offset arithmetic; "ival" is a loaded value used as a position (attr: its bound)
INDEX_OPS = frozenset({"idiv", "imod", "imul", "iadd", "iabs", "ival"})
REDUCTIONS = frozenset("sum max min prod argmax argmin".split())  # over the reduced axis


@dataclass(frozen=True)
class Load:
    """An element of a tensor argument of the kernel, at `offset` (an integer Expr)."""

    tensor: str  # the kernel argument's name
    offset: Expr
    space: str  # "full" (varies along the reduced axis) or "row" (one value per output row)


@dataclass(frozen=True)
class Expr:
    op: str  # a primitive, "const", "load", "var", "reduce", or an INDEX_OPS op
    args: tuple[Expr, ...] = ()
    attr: Any = None  # the constant, the Load, or the variable name

    def __add__(self, other: Expr) -> Expr:
        return call("add", self, other)

    def __mul__(self, other: Expr) -> Expr:
        return call("mul", self, other)

    def __sub__(self, other: Expr) -> Expr:
        return call("sub", self, other)

    def __truediv__(self, other: Expr) -> Expr:
        return call("div", self, other)


def const(value: float | int | bool) -> Expr:
    return Expr("const", attr=value)


def var(name: str) -> Expr:
    return Expr("var", attr=name)


def call(op: str, *args: Expr) -> Expr:
    expected = 1 if op in UNARY else 2 if op in BINARY else 3 if op in TERNARY else None
    if expected is None or expected != len(args):
        raise ValueError(f"primitive {op!r} takes {expected} argument(s), got {len(args)}")
    return Expr(op, tuple(args))


def reduce(kind: str, e: Expr) -> Expr:
    """The reduction of a full-space expression over the kernel's reduced axis (a row value)."""
    if kind not in REDUCTIONS:
        raise ValueError(f"unknown reduction {kind!r}")
    return Expr("reduce", (e,), attr=kind)


def as_expr(value: Any) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool | int | float):
        return const(value)
    raise TypeError(f"not an expression: {value!r}")


def is_const(e: Expr, value: float | None = None) -> bool:
    return e.op == "const" and (value is None or e.attr == value)


_NEVER_NEGATIVE = frozenset(
    "exp sqrt rsqrt abs sigmoid not isnan to_bool lt le gt ge eq ne and or".split()
)
_KEEPS_SIGN = {"add": all, "div": all, "min": all, "where": all, "max": any, "to_float": all}


def never_negative(e: Expr) -> bool:
    """Whether every value of `e` is >= 0 or NaN (a sum of such terms cannot cancel, so fp32
    accumulates it to a relative error of at most its length times fp32's epsilon)."""
    if e.op == "const":
        return isinstance(e.attr, bool | int | float) and not e.attr < 0
    if e.op in _NEVER_NEGATIVE:
        return True
    if e.op == "mul":
        return e.args[0] == e.args[1] or all(never_negative(a) for a in e.args)
    if e.op == "pow":
        exponent = e.args[1]
        even = is_const(exponent) and float(exponent.attr) % 2 == 0
        return even or never_negative(e.args[0])
    rule = _KEEPS_SIGN.get(e.op)
    operands = e.args[1:] if e.op == "where" else e.args  # where: the condition's sign is moot
    return rule is not None and rule(never_negative(a) for a in operands)


def walk(e: Expr):
    """Every node of the tree, children first."""
    for a in e.args:
        yield from walk(a)
    if e.op == "load":
        yield from walk(e.attr.offset)
    yield e


def loads(e: Expr) -> list[Load]:
    seen: list[Load] = []
    for node in walk(e):
        if node.op == "load" and node.attr not in seen:
            seen.append(node.attr)
    return seen


# ---------------------------------------------------------------- integer offsets


def index_op(op: str, a: Expr, b: int) -> Expr:
    """Integer offset arithmetic with a constant; dividing or multiplying by 1 is left out."""
    return a if b == 1 and op in ("idiv", "imul") else Expr(op, (a, const(b)))


def offset_of(index: Expr, shape: list[int], strides: list[int]) -> Expr:
    """The memory offset of element `index` (a flat row-major index into `shape`) of a tensor
    laid out with `strides` (0 where it is broadcast). Dims of size 1 and stride 0 drop out,
    neighbours that are contiguous with each other merge, so a contiguous tensor costs no
    arithmetic and a per-channel one a single divide and modulo."""
    dims = _merge(shape, strides)
    numel = math.prod(shape) if shape else 1
    terms: list[Expr] = []
    inner = numel
    for size, stride in dims:
        inner //= size
        if stride == 0:
            continue
        term = index if inner == 1 else index_op("idiv", index, inner)
        if inner * size != numel:
            term = index_op("imod", term, size)
        terms.append(term if stride == 1 else index_op("imul", term, stride))
    if not terms:
        return const(0)
    total = terms[0]
    for t in terms[1:]:
        total = Expr("iadd", (total, t))
    return total


def repeat_offset(
    index: Expr, out_shape: list[int], in_shape: list[int], strides: list[int]
) -> Expr:
    """The offset of the source element of `index` in torch.repeat's output: along each dim the
    output index wraps around the input's size."""
    pad = len(out_shape) - len(in_shape)
    sizes, steps = [1] * pad + list(in_shape), [0] * pad + list(strides)
    terms: list[Expr] = []
    inner = math.prod(out_shape) if out_shape else 1
    for out_size, size, stride in zip(out_shape, sizes, steps, strict=True):
        inner //= out_size
        if size == 1 or stride == 0:
            continue
        term = index_op("imod", index if inner == 1 else index_op("idiv", index, inner), size)
        terms.append(term if stride == 1 else index_op("imul", term, stride))
    total = terms[0] if terms else const(0)
    for t in terms[1:]:
        total = Expr("iadd", (total, t))
    return total


def _merge(shape: list[int], strides: list[int]) -> list[tuple[int, int]]:
    """(size, stride) pairs without size-1 dims, neighbours merged where memory allows."""
    dims: list[tuple[int, int]] = []
    for size, stride in zip(shape, strides, strict=True):
        if size == 1:
            continue
        if dims:
            outer_size, outer_stride = dims[-1]
            if outer_stride == stride * size:
                dims[-1] = (outer_size * size, stride)
                continue
        dims.append((size, stride))
    return dims


def contiguous_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(int(size), 1)
    return strides[::-1]


def broadcast_strides(shape: list[int], strides: list[int], to: list[int]) -> list[int]:
    """Strides of a tensor expanded (right-aligned, numpy rules) to shape `to`."""
    if len(shape) > len(to):
        raise ValueError(f"cannot broadcast {shape} to {to}")
    pad = len(to) - len(shape)
    out = [0] * pad
    for size, stride, target in zip(shape, strides, to[pad:], strict=True):
        if size == target:
            out.append(stride if size != 1 else 0)
        elif size == 1:
            out.append(0)
        else:
            raise ValueError(f"cannot broadcast {shape} to {to}")
    return out


def substitute(e: Expr, names: dict[str, Expr], loads_full: bool = False) -> Expr:
    """`e` with variables replaced (in load offsets too); `loads_full` makes every load a
    full-space one (for a flat kernel that has no per-row mask)."""
    if e.op == "var":
        return names.get(e.attr, e)
    if e.op == "load":
        load = e.attr
        space = "full" if loads_full else load.space
        return Expr("load", attr=Load(load.tensor, substitute(load.offset, names), space))
    if not e.args:
        return e
    return Expr(e.op, tuple(substitute(a, names, loads_full) for a in e.args), e.attr)
