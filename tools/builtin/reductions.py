"""Row-wise ATen ops (reductions, the softmax family; the norms in norm_ops.py) as expressions.

Each lowering sees its arguments through `RowArgs` and answers a `RowLowering`: the space it
works in (a reshape of its input's shape), which dims of that space it reduces, and one
expression per output (reductions are `reduce` nodes; see tools/builtin/expr.py). The builder
(tools/builtin/groups.py) turns the space into rows: a row is one index of the kept dims.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.expr import Expr, call, const, reduce
from kernelgraph.tools.builtin.lowering import power


class RowArgs(Protocol):
    values: list[Any]  # the op's arguments; tensors as placeholders
    kwargs: dict[str, Any]
    in_shape: list[int]  # the first tensor argument's shape

    def x(self) -> Expr: ...  # the first argument over the full space

    def full(self, i: int, shape: list[int], place: list[int] | None = None) -> Expr: ...

    def row(self, i: int, shape: list[int]) -> Expr: ...  # argument i, one value per row

    def present(self, i: int) -> bool: ...


@dataclass
class RowLowering:
    space: list[int]
    reduce_dims: list[int]
    outputs: list[Expr | None] = field(default_factory=list)


RowFn = Callable[[RowArgs], RowLowering]
ROW_OPS: dict[str, RowFn] = {}


def _register(*names: str):
    def wrap(fn: RowFn) -> RowFn:
        for name in names:
            ROW_OPS[name] = fn
        return fn

    return wrap


def dims_of(value: Any, rank: int) -> list[int]:
    """Normalised reduction dims: None or [] means every dim."""
    if value is None or value == []:
        return list(range(rank))
    dims = [value] if isinstance(value, int) else list(value)
    return sorted({d % rank if rank else 0 for d in dims})


def _get(a: RowArgs, i: int, name: str, default: Any = None) -> Any:
    return a.values[i] if len(a.values) > i else a.kwargs.get(name, default)


def _count(a: RowArgs, dims: list[int]) -> int:
    return math.prod(a.in_shape[d] for d in dims) if a.in_shape else 1


def _rows_first(a: RowArgs, dims: list[int]) -> tuple[RowArgs, list[int]]:
    """Reduced dims that are not adjacent (x.mean(dim=(0, 2))): the input read with the kept
    dims first and the reduced ones last, so that each row is one run of the space; the rows
    come out in the kept dims' order, the output's."""
    if not dims or dims == list(range(dims[0], dims[-1] + 1)):
        return a, dims
    rank = len(a.in_shape)
    order = [d for d in range(rank) if d not in dims] + dims
    shape = [a.in_shape[d] for d in order]
    return _Permuted(a, shape, [order.index(d) for d in range(rank)]), list(
        range(rank - len(dims), rank)
    )


def _simple(kind: str, post: Callable[[Expr, int], Expr] | None = None) -> RowFn:
    def lower(a: RowArgs) -> RowLowering:
        a, dims = _rows_first(a, dims_of(_get(a, 1, "dim"), len(a.in_shape)))
        value = reduce(kind, a.x())
        if post is not None:
            value = post(value, _count(a, dims))
        return RowLowering(list(a.in_shape), dims, [value])

    return lower


ROW_OPS["sum"] = _simple("sum")
ROW_OPS["nansum"] = _simple("sum")
ROW_OPS["mean"] = _simple("sum", lambda v, n: call("div", v, const(float(n))))
ROW_OPS["amax"] = _simple("max")
ROW_OPS["amin"] = _simple("min")
ROW_OPS["prod"] = _simple("prod")


def _truth(kind: str) -> RowFn:
    """any, all and count_nonzero: max, min and sum of (x != 0) as 0.0 or 1.0 (a float sum
    counts exactly up to 2**24 per row)."""

    def lower(a: RowArgs) -> RowLowering:
        a, dims = _rows_first(a, dims_of(_get(a, 1, "dim"), len(a.in_shape)))
        nonzero = call("to_float", call("ne", a.x(), const(0)))
        return RowLowering(list(a.in_shape), dims, [reduce(kind, nonzero)])

    return lower


ROW_OPS["any"] = _truth("max")
ROW_OPS["all"] = _truth("min")
ROW_OPS["count_nonzero"] = _truth("sum")


def _value_and_index(kind: str) -> RowFn:
    def lower(a: RowArgs) -> RowLowering:
        dims = dims_of(_get(a, 1, "dim"), len(a.in_shape))
        x = a.x()
        return RowLowering(list(a.in_shape), dims, [reduce(kind, x), reduce("arg" + kind, x)])

    return lower


ROW_OPS["max.dim"] = _value_and_index("max")
ROW_OPS["min.dim"] = _value_and_index("min")


def _whole(kind: str) -> RowFn:
    def lower(a: RowArgs) -> RowLowering:
        return RowLowering(list(a.in_shape), list(range(len(a.in_shape))), [reduce(kind, a.x())])

    return lower


ROW_OPS["max.default"] = _whole("max")
ROW_OPS["min.default"] = _whole("min")


def _arg_reduce(kind: str) -> RowFn:
    def lower(a: RowArgs) -> RowLowering:
        dim = _get(a, 1, "dim")
        if dim is None and len(a.in_shape) > 1:
            raise Unsupported(f"aten.{kind} over a flattened tensor", "dim=None")
        return RowLowering(list(a.in_shape), dims_of(dim, len(a.in_shape)), [reduce(kind, a.x())])

    return lower


ROW_OPS["argmax"] = _arg_reduce("argmax")
ROW_OPS["argmin"] = _arg_reduce("argmin")


def _moments(a: RowArgs, dims: list[int]) -> tuple[Expr, Expr]:
    """(mean, sum of squared deviations) over `dims`, two-pass for accuracy."""
    n = float(_count(a, dims))
    x = a.x()
    mean = call("div", reduce("sum", x), const(n))
    centred = call("sub", x, mean)
    return mean, reduce("sum", call("mul", centred, centred))


def _variance(a: RowArgs, dims: list[int]) -> Expr:
    correction = a.kwargs.get("correction")
    if correction is None:
        unbiased = _get(a, 2, "unbiased", True)
        correction = 1 if unbiased in (True, None) else 0
    _, squares = _moments(a, dims)
    return call("div", squares, const(float(max(_count(a, dims) - correction, 0))))


def _var_like(take_sqrt: bool) -> RowFn:
    def lower(a: RowArgs) -> RowLowering:
        a, dims = _rows_first(a, dims_of(_get(a, 1, "dim"), len(a.in_shape)))
        value = _variance(a, dims)
        return RowLowering(list(a.in_shape), dims, [call("sqrt", value) if take_sqrt else value])

    return lower


ROW_OPS["var"] = _var_like(False)
ROW_OPS["std"] = _var_like(True)


def _var_mean_like(take_sqrt: bool) -> RowFn:
    """torch.var_mean and std_mean: (variance or deviation, mean)."""

    def lower(a: RowArgs) -> RowLowering:
        a, dims = _rows_first(a, dims_of(_get(a, 1, "dim"), len(a.in_shape)))
        mean, _ = _moments(a, dims)
        value = _variance(a, dims)
        spread = call("sqrt", value) if take_sqrt else value
        return RowLowering(list(a.in_shape), dims, [spread, mean])

    return lower


ROW_OPS["var_mean"] = _var_mean_like(False)
ROW_OPS["std_mean"] = _var_mean_like(True)


@_register("linalg_vector_norm", "norm")
def _vector_norm(a: RowArgs) -> RowLowering:
    a, dims = _rows_first(a, dims_of(_get(a, 2, "dim"), len(a.in_shape)))
    return _norm_of(a, a.x(), _get(a, 1, "ord", 2), dims)


@_register("dist")
def _dist(a: RowArgs) -> RowLowering:
    """torch.dist(x, y, p): the p-norm of x - y over every element."""
    difference = call("sub", a.x(), a.full(1, list(a.in_shape)))
    return _norm_of(a, difference, _get(a, 2, "p", 2), list(range(len(a.in_shape))))


def _norm_of(a: RowArgs, x: Expr, order: Any, dims: list[int]) -> RowLowering:
    if isinstance(order, dict):  # non-finite floats are traced as {"f": "inf"}
        order = float(order.get("f", "nan"))
    if order in (None, "fro"):
        order = 2
    if order == 2:
        value = call("sqrt", reduce("sum", call("mul", x, x)))
    elif order == 1:
        value = reduce("sum", call("abs", x))
    elif order == math.inf:
        value = reduce("max", call("abs", x))
    elif order == -math.inf:
        value = reduce("min", call("abs", x))
    elif isinstance(order, int | float) and order > 0:
        total = reduce("sum", power(call("abs", x), order))
        value = power(total, 1.0 / order)
    else:
        raise Unsupported(f"aten.linalg_vector_norm with ord={order!r}")
    return RowLowering(list(a.in_shape), dims, [value])


def _row_max(a: RowArgs) -> tuple[Expr, Expr]:
    x = a.x()
    m = reduce("max", x)
    # a row of -inf has max -inf: shift by 0 instead, so exp gives 0 and not NaN
    safe = call("where", call("eq", m, const(-math.inf)), const(0.0), m)
    return x, safe


@_register("_softmax", "softmax", "_safe_softmax")
def _softmax(a: RowArgs) -> RowLowering:
    x, m = _row_max(a)
    e = call("exp", call("sub", x, m))
    return RowLowering(list(a.in_shape), dims_of(a.values[1], len(a.in_shape)),
                       [call("div", e, reduce("sum", e))])  # fmt: skip


@_register("_log_softmax", "log_softmax")
def _log_softmax(a: RowArgs) -> RowLowering:
    x, m = _row_max(a)
    total = reduce("sum", call("exp", call("sub", x, m)))
    out = call("sub", call("sub", x, m), call("log", total))
    return RowLowering(list(a.in_shape), dims_of(a.values[1], len(a.in_shape)), [out])


@_register("logsumexp")
def _logsumexp(a: RowArgs) -> RowLowering:
    a, dims = _rows_first(a, dims_of(_get(a, 1, "dim"), len(a.in_shape)))
    x, m = _row_max(a)
    total = reduce("sum", call("exp", call("sub", x, m)))
    return RowLowering(list(a.in_shape), dims, [call("add", m, call("log", total))])


@_register("aminmax")
def _aminmax(a: RowArgs) -> RowLowering:
    a, dims = _rows_first(a, dims_of(_get(a, 1, "dim"), len(a.in_shape)))
    x = a.x()
    return RowLowering(list(a.in_shape), dims, [reduce("min", x), reduce("max", x)])


class _Reshaped:
    """A RowArgs whose input is seen in another (flat-aligned) shape, for the group norm."""

    def __init__(self, inner: RowArgs, shape: list[int]) -> None:
        self.inner, self.in_shape = inner, shape
        self.values, self.kwargs = inner.values, inner.kwargs

    def x(self) -> Expr:
        return self.inner.x()

    def row(self, i: int, shape: list[int]) -> Expr:
        return self.inner.row(i, shape)

    def full(self, i: int, shape: list[int], place: list[int] | None = None) -> Expr:
        return self.inner.full(i, shape, place)

    def present(self, i: int) -> bool:
        return self.inner.present(i)


class _Permuted(_Reshaped):
    """A RowArgs whose input is seen with its dims permuted: input dim d is dim place[d]."""

    def __init__(self, inner: RowArgs, shape: list[int], place: list[int]) -> None:
        super().__init__(inner, shape)
        self.place = place

    def x(self) -> Expr:
        return self.inner.full(0, self.in_shape, self.place)


def row_key(name: str, overload: str) -> str | None:
    if f"{name}.{overload}" in ROW_OPS:
        return f"{name}.{overload}"
    return name if name in ROW_OPS else None


from kernelgraph.tools.builtin import norm_ops  # noqa: E402, F401  (registers the norms)
