"""More pointwise math, written with the primitives every printer already knows (so both DSLs
get them at once): hyperbolic and inverse trigonometric functions, erfc, hypot, frac, floor
division, logit, and log-sigmoid's forward as autograd traces it. Registered into
lowering.POINTWISE."""

from __future__ import annotations

from kernelgraph.tools.builtin.expr import Expr, as_expr, call, const
from kernelgraph.tools.builtin.lowering import POINTWISE, _arg, _register, _x, softplus


def _half(e: Expr) -> Expr:
    return call("mul", e, const(0.5))


@_register("sinh")
def _sinh(args, kwargs):
    x = _x(args)  # expm1 keeps small arguments exact, where exp(x) - exp(-x) cancels
    return _half(call("sub", call("expm1", x), call("expm1", call("neg", x))))


@_register("cosh")
def _cosh(args, kwargs):
    x = _x(args)
    return _half(call("add", call("exp", x), call("exp", call("neg", x))))


@_register("tan")
def _tan(args, kwargs):
    x = _x(args)
    return call("div", call("sin", x), call("cos", x))


@_register("asinh")
def _asinh(args, kwargs):
    x = _x(args)  # sign(x) * log1p(|x| + x^2 / (1 + sqrt(x^2 + 1))): no cancellation near 0
    a = call("abs", x)
    square = call("mul", a, a)
    ratio = call(
        "div", square, call("add", const(1.0), call("sqrt", call("add", square, const(1.0))))
    )
    magnitude = call("log1p", call("add", a, ratio))
    return call("where", call("lt", x, const(0.0)), call("neg", magnitude), magnitude)


@_register("acosh")
def _acosh(args, kwargs):
    x = _x(args)
    return call("log", call("add", x, call("sqrt", call("sub", call("mul", x, x), const(1.0)))))


@_register("atanh")
def _atanh(args, kwargs):
    x = _x(args)
    return _half(call("log1p", call("div", call("mul", const(2.0), x), call("sub", const(1.0), x))))


@_register("erfc")
def _erfc(args, kwargs):
    return call("sub", const(1.0), call("erf", _x(args)))


@_register("hypot")
def _hypot(args, kwargs):
    x, y = _x(args), as_expr(args[1])
    return call("sqrt", call("add", call("mul", x, x), call("mul", y, y)))


@_register("frac")
def _frac(args, kwargs):
    x = _x(args)
    return call("sub", x, call("trunc", x))


@_register("floor_divide")
def _floor_divide(args, kwargs):
    return call("floor", call("div", _x(args), as_expr(args[1])))


@_register("logit")
def _logit(args, kwargs):
    x, eps = _x(args), _arg(args, kwargs, 1, "eps")
    if eps is not None:
        low, high = const(float(eps)), const(1.0 - float(eps))
        x = call("where", call("lt", x, low), low, call("where", call("gt", x, high), high, x))
    return call("log", call("div", x, call("sub", const(1.0), x)))


# autograd traces F.logsigmoid as (output, buffer); only the output is ever read
POINTWISE["log_sigmoid_forward"] = lambda args, kwargs: call("neg", softplus(call("neg", _x(args))))


PI = 3.141592653589793


def atan2(y: Expr, x: Expr) -> Expr:
    """atan(y / x) moved into the quadrant of (x, y); on the y axis +-pi/2, at the origin 0."""
    base = call("atan", call("div", y, x))
    left = call("where", call("lt", y, const(0.0)), call("sub", base, const(PI)),
                call("add", base, const(PI)))  # fmt: skip
    axis = call("where", call("gt", y, const(0.0)), const(PI / 2),
                call("where", call("lt", y, const(0.0)), const(-PI / 2), const(0.0)))  # fmt: skip
    quadrant = call("where", call("lt", x, const(0.0)), left, base)
    return call("where", call("eq", x, const(0.0)), axis, quadrant)


def _cosine_of_sine(x: Expr) -> Expr:
    """sqrt(1 - x^2) as sqrt((1 - x)(1 + x)), accurate near |x| = 1 (NaN past it)."""
    return call("sqrt", call("mul", call("sub", const(1.0), x), call("add", const(1.0), x)))


POINTWISE["atan"] = lambda args, kwargs: call("atan", _x(args))
POINTWISE["arctan"] = POINTWISE["atan"]
POINTWISE["atan2"] = lambda args, kwargs: atan2(_x(args), as_expr(args[1]))
POINTWISE["arctan2"] = POINTWISE["atan2"]
POINTWISE["asin"] = lambda args, kwargs: atan2(_x(args), _cosine_of_sine(_x(args)))
POINTWISE["arcsin"] = POINTWISE["asin"]
POINTWISE["acos"] = lambda args, kwargs: atan2(_cosine_of_sine(_x(args)), _x(args))
POINTWISE["arccos"] = POINTWISE["acos"]
