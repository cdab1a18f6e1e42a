"""Loss functions as row ops (ROW_OPS in tools/builtin/reductions.py): an elementwise loss over
the input's space, then the reduction the op's `reduction` argument names.

ATen's reduction codes: 0 none (the elementwise loss), 1 mean, 2 sum. Cross-entropy traces as
log_softmax then nll_loss_forward; the latter picks each row's target class with an index
predicate (class == target) inside a reduction, so it needs no gather.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.expr import Expr, call, const, reduce, var
from kernelgraph.tools.builtin.reductions import ROW_OPS, RowArgs, RowLowering, _get, _register

NONE, MEAN, SUM = 0, 1, 2


def _reduced(a: RowArgs, loss: Expr, reduction: int) -> RowLowering:
    """The elementwise `loss` over the input's space, reduced as `reduction` says."""
    shape = list(a.in_shape)
    if reduction == NONE:
        return RowLowering(shape, [], [loss])
    total = reduce("sum", loss)
    if reduction == MEAN:
        count = 1
        for size in shape:
            count *= size
        total = call("div", total, const(float(count)))
    return RowLowering(shape, list(range(len(shape))), [total])


def _difference(a: RowArgs) -> Expr:
    return call("sub", a.x(), a.full(1, list(a.in_shape)))


def _elementwise(loss: Callable[[Expr, RowArgs], Expr]):
    """A loss of (input - target), with reduction as argument 2."""

    def lower(a: RowArgs) -> RowLowering:
        return _reduced(a, loss(_difference(a), a), int(_get(a, 2, "reduction", MEAN)))

    return lower


def _squared(d: Expr, a: RowArgs) -> Expr:
    return call("mul", d, d)


def _absolute(d: Expr, a: RowArgs) -> Expr:
    return call("abs", d)


def _smooth_l1(d: Expr, a: RowArgs) -> Expr:
    """0.5 d^2 / beta below beta, |d| - 0.5 beta above (beta 0: the L1 loss)."""
    beta = float(_get(a, 3, "beta", 1.0))
    size = call("abs", d)
    if beta == 0:
        return size
    quadratic = call("div", call("mul", call("mul", size, size), const(0.5)), const(beta))
    return call("where", call("lt", size, const(beta)), quadratic,
                call("sub", size, const(0.5 * beta)))  # fmt: skip


def _huber(d: Expr, a: RowArgs) -> Expr:
    """0.5 d^2 below delta, delta (|d| - 0.5 delta) above."""
    delta = float(_get(a, 3, "delta", 1.0))
    size = call("abs", d)
    quadratic = call("mul", call("mul", size, size), const(0.5))
    linear = call("mul", call("sub", size, const(0.5 * delta)), const(delta))
    return call("where", call("lt", size, const(delta)), quadratic, linear)


ROW_OPS["mse_loss"] = _elementwise(_squared)
ROW_OPS["l1_loss"] = _elementwise(_absolute)
ROW_OPS["smooth_l1_loss"] = _elementwise(_smooth_l1)
ROW_OPS["huber_loss"] = _elementwise(_huber)


def _weighted(a: RowArgs, loss: Expr, i: int) -> Expr:
    """`loss` times argument i (a weight broadcast over the input) when one is given."""
    return call("mul", loss, a.full(i, list(a.in_shape))) if a.present(i) else loss


@_register("binary_cross_entropy")
def _binary_cross_entropy(a: RowArgs) -> RowLowering:
    """-(t log p + (1 - t) log(1 - p)), each log clamped at -100 as torch clamps it."""
    p, t = a.x(), a.full(1, list(a.in_shape))
    floor = const(-100.0)
    log_p = call("max", call("log", p), floor)
    log_q = call("max", call("log", call("sub", const(1.0), p)), floor)
    loss = call("neg", call("add", call("mul", t, log_p),
                            call("mul", call("sub", const(1.0), t), log_q)))  # fmt: skip
    return _reduced(a, _weighted(a, loss, 2), int(_get(a, 3, "reduction", MEAN)))


@_register("binary_cross_entropy_with_logits")
def _binary_cross_entropy_with_logits(a: RowArgs) -> RowLowering:
    """(1 - t) x + (1 + (pos_weight - 1) t) (log1p(exp(-|x|)) + max(-x, 0)): stable for
    logits of either sign, as torch computes it."""
    x, t = a.x(), a.full(1, list(a.in_shape))
    softplus_neg = call("add", call("log1p", call("exp", call("neg", call("abs", x)))),
                        call("max", call("neg", x), const(0.0)))  # fmt: skip
    if a.present(3):
        scale = call("sub", a.full(3, list(a.in_shape)), const(1.0))
        softplus_neg = call("mul", call("add", const(1.0), call("mul", scale, t)), softplus_neg)
    loss = call("add", call("mul", call("sub", const(1.0), t), x), softplus_neg)
    return _reduced(a, _weighted(a, loss, 2), int(_get(a, 4, "reduction", MEAN)))


@_register("soft_margin_loss")
def _soft_margin_loss(a: RowArgs) -> RowLowering:
    """log(1 + exp(-y x))."""
    margin = call("neg", call("mul", a.full(1, list(a.in_shape)), a.x()))
    loss = call("log1p", call("exp", margin))
    return _reduced(a, loss, int(_get(a, 2, "reduction", MEAN)))


@_register("nll_loss_forward")
def _nll_loss(a: RowArgs) -> RowLowering:
    """-(log-probability of each row's target class), over the rows that are not ignored;
    mean divides by their count (total_weight, the op's second output)."""
    if len(a.in_shape) != 2:
        raise Unsupported("aten.nll_loss_forward", f"input of shape {a.in_shape} (not [N, C])")
    if a.present(2):
        raise Unsupported("aten.nll_loss_forward with class weights")
    reduction = int(_get(a, 3, "reduction", MEAN))
    ignore = _get(a, 4, "ignore_index", -100)
    rows, classes = a.in_shape
    target = a.row(1, [rows])  # one load a row, not one per element
    column = Expr("imod", (var("idx"), const(classes)))
    picked = call("and", call("eq", column, target), call("ne", target, const(float(ignore))))
    loss = call("where", picked, call("neg", a.x()), const(0.0))
    weight = call("where", picked, const(1.0), const(0.0))
    dims = [1] if reduction == NONE else [0, 1]
    total, count = reduce("sum", loss), reduce("sum", weight)
    if reduction == MEAN:
        total = call("div", total, count)
    return RowLowering([rows, classes], dims, [total, None if reduction == NONE else count])


@_register("nll_loss_total")
def _nll_loss_total(a: RowArgs) -> RowLowering:
    """(each row's loss, target, reduction, ignore_index): the rows' losses summed, divided for
    mean by the rows not ignored; their count is the second output (total_weight)."""
    reduction, ignore = int(a.values[2]), a.values[3]
    (rows,) = a.in_shape
    kept = call("ne", a.full(1, [rows]), const(float(ignore)))
    total = reduce("sum", a.x())
    count = reduce("sum", call("where", kept, const(1.0), const(0.0)))
    if reduction == MEAN:
        total = call("div", total, count)
    return RowLowering([rows], [0], [total, count])


def split_nll_loss(ops: list[dict], i: int) -> None:
    """A mean or summed NLL loss over [N, C] becomes each row's loss (an op appended to `ops`,
    a reduction over C like the log-softmax before it, so the two share one kernel and the
    log-probabilities never go through memory) and, in the op's own place, their total over N."""
    op = ops[i]
    argv = list(op["argv"]) + [None] * (5 - len(op["argv"]))
    kwargs = op.get("kwargv") or {}
    reduction = argv[3] if argv[3] is not None else kwargs.get("reduction", MEAN)
    ignore = argv[4] if argv[4] is not None else kwargs.get("ignore_index", -100)
    shapes = op.get("arg_shapes") or []
    if reduction == NONE or argv[2] is not None or not shapes or len(shapes[0]) != 2:
        return  # per row already, class weights (unsupported), or not [N, C]: as traced
    rows = shapes[0][0]
    dtype = op["outs"][0]["dtype"]
    per_row = len(ops)
    ops.append({**op, "argv": [argv[0], argv[1], None, NONE, ignore], "kwargv": {},
                "outs": [{"shape": [rows], "dtype": dtype}]})  # fmt: skip
    ops[i] = {
        **op,
        "op": "aten.nll_loss_total",
        "overload": "default",
        "argv": [{"t": f"op:{per_row}", "o": 0}, argv[1], reduction, ignore],
        "kwargv": {},
        "arg_shapes": [[rows], list(shapes[1])],
        "reads": [f"op:{per_row}", *(op.get("reads") or [])[1:2]],
        "fused_before": [per_row],
    }
