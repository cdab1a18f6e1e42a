"""Row lowerings of the norms: layer and group norm, batch norm in eval mode, and batch norm in
training mode as its two halves (statistics per channel, then the normalisation).
Registered into reductions.ROW_OPS."""

from __future__ import annotations

import math
from typing import Any

from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.expr import Expr, call, const
from kernelgraph.tools.builtin.reductions import (
    ROW_OPS,
    RowArgs,
    RowLowering,
    _count,
    _moments,
    _Permuted,
    _register,
    _Reshaped,
)


@_register("native_layer_norm")
def _layer_norm(a: RowArgs) -> RowLowering:
    normalized = list(a.values[1])
    rank = len(a.in_shape)
    dims = list(range(rank - len(normalized), rank))
    mean, squares = _moments(a, dims)
    rstd = call("rsqrt", call("add", call("div", squares, const(float(_count(a, dims)))),
                              const(float(a.values[4]))))  # fmt: skip
    out = call("mul", call("sub", a.x(), mean), rstd)
    if a.present(2):
        out = call("mul", out, a.full(2, list(a.in_shape)))
    if a.present(3):
        out = call("add", out, a.full(3, list(a.in_shape)))
    return RowLowering(list(a.in_shape), dims, [out, mean, rstd])


@_register("native_group_norm")
def _group_norm(a: RowArgs) -> RowLowering:
    n, c, hxw, groups = (int(v) for v in a.values[3:7])
    eps = float(a.values[7])
    space = [n, groups, (c // groups) * hxw]
    mean, squares = _moments(_Reshaped(a, space), [2])
    rstd = call("rsqrt", call("add", call("div", squares, const(float(space[2]))), const(eps)))
    out = call("mul", call("sub", a.x(), mean), rstd)
    per_channel = [n, c, hxw]
    if a.present(1):
        out = call("mul", out, a.full(1, per_channel, place=[1]))
    if a.present(2):
        out = call("add", out, a.full(2, per_channel, place=[1]))
    return RowLowering(space, [2], [out, mean, rstd])


def _per_channel(a: RowArgs) -> list[int]:
    shape = list(a.in_shape)
    return [math.prod(shape[:1]), shape[1], math.prod(shape[2:])]


def _normalise(a: RowArgs, mean: Expr, rstd: Expr, weight: int, bias: int) -> Expr:
    out = call("mul", call("sub", a.x(), mean), rstd)
    if a.present(weight):
        out = call("mul", out, a.full(weight, _per_channel(a), place=[1]))
    if a.present(bias):
        out = call("add", out, a.full(bias, _per_channel(a), place=[1]))
    return out


def _batch_norm_eval(a: RowArgs, eps: Any) -> RowLowering:
    mean = a.full(3, _per_channel(a), place=[1])
    variance = a.full(4, _per_channel(a), place=[1])
    rstd = call("rsqrt", call("add", variance, const(float(eps))))
    return RowLowering(list(a.in_shape), [], [_normalise(a, mean, rstd, 1, 2), None, None])


ROW_OPS["_native_batch_norm_legit_no_training"] = lambda a: _batch_norm_eval(a, a.values[6])


@_register("native_batch_norm", "_native_batch_norm_legit")
def _native_batch_norm(a: RowArgs) -> RowLowering:
    if a.values[5]:
        raise Unsupported("aten.native_batch_norm in training mode",
                          "the program splits it into batch_norm_stats and batch_norm_apply")  # fmt: skip
    return _batch_norm_eval(a, a.values[7])


# Batch norm in training mode is two kernels (tools/builtin/program.py splits the op): the
# statistics per channel, reduced over every other dim (not adjacent in NCHW, so the kernel
# walks a permuted [C, N, ...] space), then the normalisation, a pointwise op that fuses with
# what follows. Arguments: (input, weight, bias, running_mean, running_var, momentum, eps);
# outputs: mean, rstd, and the new running mean and variance when the module keeps them.
@_register("batch_norm_stats")
def _batch_norm_stats(a: RowArgs) -> RowLowering:
    shape = list(a.in_shape)
    permuted = [shape[1], shape[0], *shape[2:]]
    channels = _Permuted(a, permuted, [1, 0, *range(2, len(shape))])
    dims = list(range(1, len(shape)))
    mean, squares = _moments(channels, dims)
    count = float(_count(channels, dims))
    rstd = call("rsqrt", call("add", call("div", squares, const(count)), const(float(a.values[6]))))
    outputs = [mean, rstd]
    if a.present(3):
        momentum = float(a.values[5])
        unbiased = call("div", squares, const(max(count - 1.0, 1.0)))

        def update(i: int, batch: Expr) -> Expr:
            kept = call("mul", a.row(i, [shape[1]]), const(1.0 - momentum))
            return call("add", kept, call("mul", batch, const(momentum)))

        outputs += [update(3, mean), update(4, unbiased)]
    return RowLowering(permuted, dims, outputs)


@_register("batch_norm_rows")
def _batch_norm_rows(a: RowArgs) -> RowLowering:
    """(input, weight, bias, eps) over a batch of one: each channel is one contiguous row, so
    the statistics and the normalisation are one row op, as in a layer norm."""
    shape = list(a.in_shape)
    space = [shape[1], math.prod(shape[2:])]
    mean, squares = _moments(_Reshaped(a, space), [1])
    rstd = call("rsqrt", call("add", call("div", squares, const(float(space[1]))),
                              const(float(a.values[3]))))  # fmt: skip
    return RowLowering(space, [1], [_normalise(a, mean, rstd, 1, 2), mean, rstd])


@_register("batch_norm_apply")
def _batch_norm_apply(a: RowArgs) -> RowLowering:
    """(input, weight, bias, mean, rstd): the normalisation with the statistics of the batch."""
    mean = a.full(3, _per_channel(a), place=[1])
    rstd = a.full(4, _per_channel(a), place=[1])
    return RowLowering(list(a.in_shape), [], [_normalise(a, mean, rstd, 1, 2)])
