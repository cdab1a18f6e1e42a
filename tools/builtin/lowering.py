"""Pointwise ATen ops as expressions of primitives (tools/builtin/expr.py).

One registry: `POINTWISE[name](args, kwargs) -> Expr`, where tensor arguments are already
expressions and the rest are the traced Python values. An ATen op missing here is one the
builtin cannot write; it says so by name (tools/builtin/errors.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.expr import Expr, as_expr, call, const

Lowering = Callable[[list[Any], dict[str, Any]], Expr]
POINTWISE: dict[str, Lowering] = {}


@dataclass(frozen=True)
class Position:
    """Where a pointwise op's element sits (its flat row-major index into `shape`), for ops
    whose value depends on it (triu, tril: tools/builtin/indexed.py)."""

    index: Expr
    shape: tuple[int, ...]


INDEXED: dict[str, Callable[[list[Any], dict[str, Any], Position], Expr]] = {}


def _register(*names: str):
    def wrap(fn: Lowering) -> Lowering:
        for name in names:
            POINTWISE[name] = fn
        return fn

    return wrap


def _arg(args: list[Any], kwargs: dict[str, Any], i: int, name: str, default: Any = None) -> Any:
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _x(args: list[Any]) -> Expr:
    return as_expr(args[0])


def _scaled(e: Expr, alpha: Any) -> Expr:
    return e if alpha in (None, 1) else call("mul", e, const(alpha))


def sigmoid(x: Expr) -> Expr:
    return call("sigmoid", x)


def softplus(x: Expr, beta: float = 1.0, threshold: float = 20.0) -> Expr:
    bx = x if beta == 1 else call("mul", x, const(beta))
    # log1p(exp(bx)) / beta, linear above the threshold (as torch does)
    soft = call("log1p", call("exp", call("min", bx, const(threshold))))
    if beta != 1:
        soft = call("div", soft, const(beta))
    return call("where", call("gt", bx, const(threshold)), x, soft)


def tanh(x: Expr) -> Expr:
    if x.op == "where" and x == softplus(x.args[1]):  # Mish written out: x * tanh(softplus(x))
        return tanh_softplus(x.args[1])
    return call("tanh", x)


def tanh_softplus(x: Expr) -> Expr:
    """tanh(log1p(t)) = n / (n + 2) with t = e^x and n = t (t + 2): one exp and one division
    instead of exp, log1p and tanh (a third of the instructions in a convolution's Mish
    epilogue). Above x = 20 the ratio rounds to 1 in fp32, as tanh does, so x is clamped there."""
    t = call("exp", call("min", x, const(20.0)))
    n = call("mul", t, call("add", t, const(2.0)))
    return call("div", n, call("add", n, const(2.0)))


def power(x: Expr, exponent: Any) -> Expr:
    if isinstance(exponent, Expr):
        return call("pow", x, exponent)
    if exponent == 0:
        return const(1.0)
    if exponent == 0.5:
        return call("sqrt", x)
    if exponent == -0.5:
        return call("rsqrt", x)
    if float(exponent).is_integer() and 1 <= abs(exponent) <= 4:
        result = x
        for _ in range(int(abs(exponent)) - 1):
            result = call("mul", result, x)
        return result if exponent > 0 else call("div", const(1.0), result)
    return call("pow", x, const(float(exponent)))


@_register("add")
def _add(args, kwargs):
    return call("add", _x(args), _scaled(as_expr(args[1]), _arg(args, kwargs, 2, "alpha")))


@_register("sub")
def _sub(args, kwargs):
    return call("sub", _x(args), _scaled(as_expr(args[1]), _arg(args, kwargs, 2, "alpha")))


@_register("rsub")
def _rsub(args, kwargs):
    return call("sub", as_expr(args[1]), _scaled(_x(args), _arg(args, kwargs, 2, "alpha")))


@_register("mul")
def _mul(args, kwargs):
    return call("mul", _x(args), as_expr(args[1]))


@_register("div", "true_divide")
def _div(args, kwargs):
    quotient = call("div", _x(args), as_expr(args[1]))
    mode = _arg(args, kwargs, 2, "rounding_mode")
    if mode is None:
        return quotient
    return call({"trunc": "trunc", "floor": "floor"}[mode], quotient)


def _unary(name: str, primitive: str) -> None:
    POINTWISE[name] = lambda args, kwargs: call(primitive, _x(args))


for _name, _prim in {
    "neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs",
    "erf": "erf", "floor": "floor", "ceil": "ceil", "round": "round",
    "trunc": "trunc", "sin": "sin", "cos": "cos", "log1p": "log1p", "expm1": "expm1",
    "sigmoid": "sigmoid", "logical_not": "not", "isnan": "isnan",
}.items():  # fmt: skip
    _unary(_name, _prim)


POINTWISE["tanh"] = lambda args, kwargs: tanh(_x(args))


def _binary(name: str, primitive: str) -> None:
    POINTWISE[name] = lambda args, kwargs: call(primitive, _x(args), as_expr(args[1]))


for _name, _prim in {
    "maximum": "max", "minimum": "min", "fmax": "max", "fmin": "min", "eq": "eq", "ne": "ne",
    "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "logical_and": "and", "logical_or": "or",
    "fmod": "fmod",
}.items():  # fmt: skip
    _binary(_name, _prim)
POINTWISE["max.other"] = POINTWISE["maximum"]
POINTWISE["min.other"] = POINTWISE["minimum"]


@_register("remainder")
def _remainder(args, kwargs):
    """Python's modulo (the sign of the divisor): C's fmod, moved by one divisor where the
    signs differ."""
    a, b = _x(args), as_expr(args[1])
    r = call("fmod", a, b)
    zero = const(0)
    differ = call("ne", call("lt", r, zero), call("lt", b, zero))
    return call("where", call("and", call("ne", r, zero), differ), call("add", r, b), r)


@_register("reciprocal")
def _reciprocal(args, kwargs):
    return call("div", const(1.0), _x(args))


@_register("square")
def _square(args, kwargs):
    return power(_x(args), 2)


@_register("pow")
def _pow(args, kwargs):
    base, exponent = args[0], args[1]
    if not isinstance(base, Expr):  # pow.Scalar: number ** tensor
        return call("exp", call("mul", as_expr(exponent), const(math.log(base))))
    return power(base, exponent)


@_register("exp2")
def _exp2(args, kwargs):
    return call("exp", call("mul", _x(args), const(math.log(2.0))))


POINTWISE["log2"] = lambda args, kwargs: call("mul", call("log", _x(args)), const(1 / math.log(2)))
POINTWISE["log10"] = lambda a, k: call("mul", call("log", _x(a)), const(1 / math.log(10)))


@_register("relu")
def _relu(args, kwargs):
    x = _x(args)  # where(x < 0, 0, x): NaN stays NaN, -inf becomes 0, as torch.relu does
    return call("where", call("lt", x, const(0.0)), const(0.0), x)


@_register("relu6")
def _relu6(args, kwargs):
    return _clamp(_x(args), 0.0, 6.0)


@_register("leaky_relu")
def _leaky_relu(args, kwargs):
    x, slope = _x(args), _arg(args, kwargs, 1, "negative_slope", 0.01)
    return call("where", call("gt", x, const(0.0)), x, call("mul", x, const(slope)))


@_register("gelu")
def _gelu(args, kwargs):
    x = _x(args)
    if _arg(args, kwargs, 1, "approximate", "none") == "tanh":
        inner = call("mul", x, call("add", const(1.0), call("mul", const(0.044715), power(x, 2))))
        t = tanh(call("mul", inner, const(math.sqrt(2.0 / math.pi))))
        return call("mul", call("mul", x, const(0.5)), call("add", const(1.0), t))
    e = call("erf", call("mul", x, const(1.0 / math.sqrt(2.0))))
    return call("mul", call("mul", x, const(0.5)), call("add", const(1.0), e))


@_register("silu")
def _silu(args, kwargs):
    x = _x(args)
    return call("mul", x, sigmoid(x))


@_register("mish")
def _mish(args, kwargs):
    x = _x(args)
    return call("mul", x, tanh_softplus(x))


@_register("softplus")
def _softplus(args, kwargs):
    beta = _arg(args, kwargs, 1, "beta", 1.0)
    return softplus(_x(args), beta, _arg(args, kwargs, 2, "threshold", 20.0))


@_register("elu")
def _elu(args, kwargs):
    x = _x(args)
    alpha = _arg(args, kwargs, 1, "alpha", 1.0)
    scale = _arg(args, kwargs, 2, "scale", 1.0)
    input_scale = _arg(args, kwargs, 3, "input_scale", 1.0)
    negative = call("mul", call("expm1", call("mul", x, const(input_scale))), const(alpha))
    out = call("where", call("gt", x, const(0.0)), x, negative)
    return out if scale == 1 else call("mul", out, const(scale))


@_register("celu")
def _celu(args, kwargs):
    alpha = _arg(args, kwargs, 1, "alpha", 1.0)
    return _elu([args[0], alpha, 1.0, 1.0 / alpha], {})


@_register("selu")
def _selu(args, kwargs):
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    return _elu([args[0], alpha, scale, 1.0], {})


def _clamp(x: Expr, low: Any, high: Any) -> Expr:
    # where-based so that NaN stays NaN, as torch.clamp keeps it
    if low is not None:
        low_e = as_expr(low)
        x = call("where", call("lt", x, low_e), low_e, x)
    if high is not None:
        high_e = as_expr(high)
        x = call("where", call("gt", x, high_e), high_e, x)
    return x


@_register("clamp", "clip")
def _clamp_op(args, kwargs):
    return _clamp(_x(args), _arg(args, kwargs, 1, "min"), _arg(args, kwargs, 2, "max"))


POINTWISE["clamp_min"] = lambda args, kwargs: _clamp(_x(args), args[1], None)
POINTWISE["clamp_max"] = lambda args, kwargs: _clamp(_x(args), None, args[1])


@_register("hardtanh")
def _hardtanh(args, kwargs):
    low = _arg(args, kwargs, 1, "min_val", -1.0)
    return _clamp(_x(args), low, _arg(args, kwargs, 2, "max_val", 1.0))


@_register("hardsigmoid")
def _hardsigmoid(args, kwargs):
    return call("div", _clamp(call("add", _x(args), const(3.0)), 0.0, 6.0), const(6.0))


@_register("hardswish")
def _hardswish(args, kwargs):
    x = _x(args)
    return call("mul", x, _hardsigmoid([x], {}))


@_register("hardshrink")
def _hardshrink(args, kwargs):
    x, lambd = _x(args), _arg(args, kwargs, 1, "lambd", 0.5)
    return call("where", call("gt", call("abs", x), const(lambd)), x, const(0.0))


@_register("softshrink")
def _softshrink(args, kwargs):
    x, lambd = _x(args), _arg(args, kwargs, 1, "lambd", 0.5)
    shrunk = call("sub", x, call("mul", call("where", call("gt", x, const(0.0)), const(1.0),
                                                     const(-1.0)), const(lambd)))  # fmt: skip
    return call("where", call("gt", call("abs", x), const(lambd)), shrunk, const(0.0))


@_register("threshold")
def _threshold(args, kwargs):
    x = _x(args)
    return call("where", call("gt", x, as_expr(args[1])), x, as_expr(args[2]))


@_register("sign", "sgn")
def _sign(args, kwargs):
    x = _x(args)
    positive = call("to_float", call("gt", x, const(0.0)))
    return call("sub", positive, call("to_float", call("lt", x, const(0.0))))


@_register("where")
def _where(args, kwargs):
    return call("where", as_expr(args[0]), as_expr(args[1]), as_expr(args[2]))


@_register("masked_fill")
def _masked_fill(args, kwargs):
    return call("where", as_expr(args[1]), as_expr(args[2]), _x(args))


@_register("lerp")
def _lerp(args, kwargs):
    start, end = _x(args), as_expr(args[1])
    return call("add", start, call("mul", as_expr(args[2]), call("sub", end, start)))


POINTWISE["addcmul"] = lambda a, k: call(
    "add", _x(a), _scaled(call("mul", as_expr(a[1]), as_expr(a[2])), _arg(a, k, 3, "value"))
)
POINTWISE["addcdiv"] = lambda a, k: call(
    "add", _x(a), _scaled(call("div", as_expr(a[1]), as_expr(a[2])), _arg(a, k, 3, "value"))
)


@_register("clone", "alias", "contiguous", "positive", "lift_fresh_copy")
def _identity(args, kwargs):
    return _x(args)


@_register("copy")
def _copy(args, kwargs):
    """An out-of-place `dst.copy_(src)`: src's values (alone where updates.py dropped dst),
    broadcast to dst's shape; the store casts them to dst's dtype."""
    return as_expr(args[1] if len(args) > 1 else args[0])


@_register("_to_copy", "to", "type_as")
def _cast(args, kwargs):
    dtype = kwargs.get("dtype")
    name = dtype.get("dtype") if isinstance(dtype, dict) else None
    if name == "bool":
        return call("to_bool", _x(args))
    return _x(args)  # float dtypes: the store casts; integer casts are not written here


@_register("xlogy")
def _xlogy(args, kwargs):
    x, y = _x(args), as_expr(args[1])  # 0 where x == 0 (even for y == 0), NaN where y is NaN
    product = call("where", call("eq", x, const(0.0)), const(0.0), call("mul", x, call("log", y)))
    return call("where", call("isnan", y), y, product)


@_register("tanhshrink")
def _tanhshrink(args, kwargs):
    x = _x(args)
    return call("sub", x, tanh(x))


@_register("log_sigmoid")
def _log_sigmoid(args, kwargs):
    x = _x(args)  # -softplus(-x), stable for both signs
    return call("neg", softplus(call("neg", x)))


def lower_pointwise(
    name: str, overload: str, args: list[Any], kwargs: dict[str, Any], at: Position | None = None
) -> Expr:
    if name in INDEXED and at is not None:
        return as_expr(INDEXED[name](args, kwargs, at))
    fn = POINTWISE.get(f"{name}.{overload}") or POINTWISE.get(name)
    if fn is None:
        raise Unsupported(f"aten.{name}")
    return as_expr(fn(args, kwargs))


from kernelgraph.tools.builtin import lowering_math  # noqa: E402, F401  (registers more math)
