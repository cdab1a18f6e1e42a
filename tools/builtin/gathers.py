"""Layout ops that move values without computing: each element is a load of a tensor made
outside the kernel, at an offset that is a function of the element's index.

One registry: `GATHERS[name](op, index, out_shape, source) -> offset Expr`, where `source` is
the operand's forward tensor (its shape and strides). The group builder
(tools/builtin/groups.py) makes the load; an op of a value computed inside the kernel is not a
gather (the builder raises FusionError and the program gives the op a kernel of its own).
torch.cat reads several tensors: `cat_value` (registered in CONCATS) builds its expression,
a select by position along the dim, a constant for a piece that is a fill (zeros_like).
torch.stack (`stack_value`) and F.pad's constant mode (`pad_value`, a cat of fills around one
tensor) are in CONCATS too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kernelgraph.tools.builtin.errors import FusionError, Unsupported
from kernelgraph.tools.builtin.expr import (
    Expr,
    Load,
    broadcast_strides,
    call,
    const,
    index_op,
    offset_of,
    repeat_offset,
)
from kernelgraph.tools.builtin.indexing import INDEXING, index_operands, loaded_position
from kernelgraph.tools.builtin.values import Value

Gather = Callable[[dict[str, Any], Expr, list[int], Value], Expr]
GATHERS: dict[str, Gather] = {}


def _repeat(op: dict[str, Any], index: Expr, shape: list[int], source: Value) -> Expr:
    """torch.repeat: along each dim the output index wraps around the input's size."""
    return repeat_offset(index, shape, source.shape, source.strides)


def flipped_offset(index: Expr, shape: list[int], strides: list[int], dims: list[int]) -> Expr:
    """The offset of element `index` of a tensor read backwards along `dims`: position c reads
    size - 1 - c, i.e. the stride negated from the dim's last element."""
    rank = len(shape)
    flipped = {d % rank for d in dims} if rank else set()
    steps = [-s if d in flipped else s for d, s in enumerate(strides)]
    start = sum((shape[d] - 1) * strides[d] for d in flipped)
    offset = offset_of(index, shape, steps)
    return Expr("iadd", (offset, const(start))) if start else offset


def _flip(op: dict[str, Any], index: Expr, shape: list[int], source: Value) -> Expr:
    return flipped_offset(index, shape, source.strides, list(op["argv"][1]))


def _coords(index: Expr, shape: list[int]) -> list[Expr]:
    """Each dim's coordinate of element `index` of a contiguous `shape`."""
    coords, inner = [], math.prod(shape)
    for d, size in enumerate(shape):
        inner //= size
        at = index_op("idiv", index, inner)
        coords.append(at if d == 0 else index_op("imod", at, size))
    return coords


def _at(coords: list[Expr], strides: list[int]) -> Expr:
    """The memory offset of per-dim coordinates `coords` under `strides`."""
    terms = [index_op("imul", c, s) for c, s in zip(coords, strides, strict=True) if s != 0]
    offset = terms[0] if terms else const(0)
    for term in terms[1:]:
        offset = Expr("iadd", (offset, term))
    return offset


def _roll(op: dict[str, Any], index: Expr, shape: list[int], source: Value) -> Expr:
    """torch.roll: position c along a rolled dim reads (c - shift) mod size; without dims the
    flattened tensor rolls."""
    argv = list(op["argv"]) + [[]] * (3 - len(op["argv"]))
    shifts, dims = list(argv[1]), list(argv[2])
    if not dims:
        total = math.prod(shape)
        back = index_op("imod", Expr("iadd", (index, const(-shifts[0] % total))), total)
        return offset_of(back, shape, source.strides)
    coords = _coords(index, shape)
    for shift, dim in zip(shifts, dims, strict=True):
        d, size = dim % len(shape), shape[dim % len(shape)]
        if shift % size:
            coords[d] = index_op("imod", Expr("iadd", (coords[d], const(-shift % size))), size)
    return _at(coords, source.strides)


def _pixel_shuffle(op: dict[str, Any], index: Expr, shape: list[int], source: Value) -> Expr:
    """[.., C, H r, W r] from [.., C r r, H, W]: out (c, h r + i, w r + j) reads channel
    c r r + i r + j at (h, w)."""
    r = int(op["argv"][1])
    *lead, c, y, x = _coords(index, shape)
    channel = Expr("iadd", (index_op("imul", c, r * r), Expr("iadd", (index_op("imul", index_op("imod", y, r), r),
                                                                 index_op("imod", x, r)))))  # fmt: skip
    return _at([*lead, channel, index_op("idiv", y, r), index_op("idiv", x, r)], source.strides)


def _pixel_unshuffle(op: dict[str, Any], index: Expr, shape: list[int], source: Value) -> Expr:
    """[.., C r r, H, W] from [.., C, H r, W r]: the inverse of pixel_shuffle."""
    r = int(op["argv"][1])
    *lead, channel, y, x = _coords(index, shape)
    i, j = index_op("imod", index_op("idiv", channel, r), r), index_op("imod", channel, r)
    rows = Expr("iadd", (index_op("imul", y, r), i))
    cols = Expr("iadd", (index_op("imul", x, r), j))
    return _at([*lead, index_op("idiv", channel, r * r), rows, cols], source.strides)


def _twice_max0(i: Expr) -> Expr:
    return Expr("iadd", (i, Expr("iabs", (i,))))  # 2 max(i, 0)


def _replicated(i: Expr, size: int) -> Expr:
    """i clamped to [0, size - 1]: min(max(i, 0), size - 1) as halves of sums with |.|."""
    low = index_op("idiv", _twice_max0(i), 2)
    gap = Expr("iadd", (low, const(1 - size)))  # low - (size - 1)
    return index_op("idiv", Expr("iadd", (Expr("iadd", (low, const(size - 1))),
                                      index_op("imul", Expr("iabs", (gap,)), -1))), 2)  # fmt: skip


def _reflected(i: Expr, size: int) -> Expr:
    """i mirrored into [0, size - 1] about both ends (no edge repeated): (n - |n - |i||) with
    n = size - 1, for i within one size of the input."""
    far = Expr("iadd", (index_op("imul", Expr("iabs", (i,)), -1), const(size - 1)))
    return Expr("iadd", (index_op("imul", Expr("iabs", (far,)), -1), const(size - 1)))


def _edge_pad(fold: Callable[[Expr, int], Expr]) -> Gather:
    """F.pad's reflect and replicate modes: each padded coordinate reads the input at
    `fold(coordinate - leading pad, size)`."""

    def gather(op: dict[str, Any], index: Expr, shape: list[int], source: Value) -> Expr:
        pads = list(op["argv"][1])
        coords = _coords(index, shape)
        rank = len(shape)
        for back in range(len(pads) // 2):
            d = rank - 1 - back  # pads list (before, after) pairs from the last dim backwards
            before, size = pads[2 * back], source.shape[d]
            if before or pads[2 * back + 1]:
                coords[d] = fold(Expr("iadd", (coords[d], const(-before))), size)
        return _at(coords, source.strides)

    return gather


def _nearest(exact: bool) -> Gather:
    """F.interpolate's nearest modes at a whole-number ratio per resized dim (the spatial dims
    after N and C): upsampling by f reads position c // f; downsampling by f reads c * f, or
    c * f + f // 2 for nearest-exact (torch's floor((c + 0.5) * f))."""

    def gather(op: dict[str, Any], index: Expr, shape: list[int], source: Value) -> Expr:
        coords = _coords(index, shape)
        for d in range(2, len(shape)):
            size, out = source.shape[d], shape[d]
            if out % size == 0:
                coords[d] = index_op("idiv", coords[d], out // size)
            elif size % out == 0:
                f = size // out
                coords[d] = index_op("imul", coords[d], f)
                if exact and f // 2:
                    coords[d] = Expr("iadd", (coords[d], const(f // 2)))
            else:
                raise Unsupported(
                    f"aten.{op['op']} from {size} to {out}", "a ratio that is not whole"
                )
        return _at(coords, source.strides)

    return gather


GATHERS["repeat"] = _repeat
GATHERS["flip"] = _flip
GATHERS["roll"] = _roll
GATHERS["pixel_shuffle"] = _pixel_shuffle
GATHERS["pixel_unshuffle"] = _pixel_unshuffle
for _d in (1, 2, 3):
    GATHERS[f"reflection_pad{_d}d"] = _edge_pad(_reflected)
    GATHERS[f"replication_pad{_d}d"] = _edge_pad(_replicated)
    GATHERS[f"upsample_nearest{_d}d"] = _nearest(exact=False)
    GATHERS[f"_upsample_nearest_exact{_d}d"] = _nearest(exact=True)


FILLS = {"zeros": 0.0, "zeros_like": 0.0, "new_zeros": 0.0, "ones": 1.0, "ones_like": 1.0,
         "new_ones": 1.0}  # fmt: skip


def fill_of(op: dict[str, Any]) -> float | None:
    """The value an op fills its tensor with (zeros, ones_like, ...), None for any other op."""
    name = op["op"].split(".", 1)[1]
    return FILLS.get(name) if op.get("kind") == "alloc" else None


def _fill(builder, ref: dict) -> tuple[float, list[int]] | None:
    """(value, shape) of a piece made by a fill op in the forward, None for any other."""
    label = builder.ctx.chain(ref)[0][0]
    if not label.startswith("op:"):
        return None
    op = builder.ctx.ops[int(label[3:])]
    value = fill_of(op)
    return None if value is None else (value, list(op["outs"][0]["shape"]))


def cat_value(builder, op: dict[str, Any], index: Expr, shape: list[int]) -> Expr:
    """torch.cat of tensors made outside the kernel: piece i where the position along the dim
    falls in its range. A piece's load wraps its position (pos - start) around the piece's
    length, so lanes that belong to another piece still read inside this one."""
    rank = len(shape)
    dim = (op["argv"][1] if len(op["argv"]) > 1 else op.get("kwargv", {}).get("dim", 0)) % rank
    inner = 1
    for size in shape[dim + 1 :]:
        inner *= size
    pos = index_op("imod", index_op("idiv", index, inner), shape[dim])
    outer, within = index_op("idiv", index, inner * shape[dim]), index_op("imod", index, inner)
    pieces: list[tuple[int, Expr]] = []
    start = 0
    for ref in op["argv"][0]:
        fill = _fill(builder, ref)
        if fill is None and builder.ctx.chain(ref)[0] in builder.env:
            raise FusionError("cat of a value inside the kernel")
        value = None if fill is not None else builder.ctx.external(ref)
        length = fill[1][dim] if fill is not None else value.shape[dim]
        if length == 0:
            continue
        if fill is not None:
            piece = const(fill[0])
        else:
            local_shape = [*shape[:dim], length, *shape[dim + 1 :]]
            wrapped = index_op("imod", Expr("iadd", (pos, const(length - start % length))), length)
            local = Expr(
                "iadd", (index_op("imul", outer, length * inner), index_op("imul", wrapped, inner))
            )
            if inner > 1:
                local = Expr("iadd", (local, within))
            strides = broadcast_strides(value.shape, value.strides, local_shape)
            load = Load(builder._arg(value), offset_of(local, local_shape, strides), "full")
            piece = Expr("load", attr=load)
        start += length
        pieces.append((start, piece))
    result = pieces[-1][1]
    for end, piece in reversed(pieces[:-1]):
        result = call("where", call("lt", pos, const(end)), piece, result)
    return result


def pad_value(builder, op: dict[str, Any], index: Expr, shape: list[int]) -> Expr:
    """F.pad's constant mode (aten.constant_pad_nd) of a tensor made outside the kernel: the
    input where each coordinate minus its leading pad falls inside it, the fill elsewhere.
    Negative pads crop. A coordinate that may fall outside is wrapped into the input (as cat's
    pieces are), so lanes that get the fill still read inside it."""
    source = op["argv"][0]
    if builder.ctx.chain(source)[0] in builder.env:
        raise FusionError("pad of a value inside the kernel")
    value = builder.ctx.external(source)
    pads = list(op["argv"][1])
    fill = op["argv"][2] if len(op["argv"]) > 2 else op.get("kwargv", {}).get("value", 0.0)
    rank, inner = len(shape), math.prod(shape)
    terms: list[Expr] = []
    valid = None
    for d in range(rank):
        inner //= shape[d]
        size, stride, out = value.shape[d], value.strides[d], shape[d]
        back = rank - 1 - d  # F.pad lists (before, after) pairs from the last dim backwards
        before = pads[2 * back] if 2 * back < len(pads) else 0
        coord = (
            index_op("idiv", index, inner)
            if d == 0
            else index_op("imod", index_op("idiv", index, inner), out)
        )
        checks = ([call("ge", coord, const(before))] if before > 0 else []) + (
            [call("lt", coord, const(before + size))] if before + size < out else []
        )
        for check in checks:
            valid = check if valid is None else call("and", valid, check)
        if size == 1 or stride == 0:
            continue
        if checks:
            at = index_op("imod", Expr("iadd", (coord, const(-before % size))), size)
        else:
            at = Expr("iadd", (coord, const(-before))) if before else coord
        terms.append(index_op("imul", at, stride))
    offset = terms[0] if terms else const(0)
    for term in terms[1:]:
        offset = Expr("iadd", (offset, term))
    load = Expr("load", attr=Load(builder._arg(value), offset, "full"))
    return load if valid is None else call("where", valid, load, const(float(fill)))


def stack_value(builder, op: dict[str, Any], index: Expr, shape: list[int]) -> Expr:
    """torch.stack of tensors made outside the kernel: the position along the new dim picks
    the tensor; every tensor is read at the same element, always inside it."""
    rank = len(shape)
    dim = (op["argv"][1] if len(op["argv"]) > 1 else op.get("kwargv", {}).get("dim", 0)) % rank
    inner = math.prod(shape[dim + 1 :])
    pos = index_op("imod", index_op("idiv", index, inner), shape[dim])
    outer = index_op("idiv", index, inner * shape[dim])
    local = index_op("imul", outer, inner)
    if inner > 1:
        local = Expr("iadd", (local, index_op("imod", index, inner)))
    each = [*shape[:dim], *shape[dim + 1 :]]
    pieces = []
    for ref in op["argv"][0]:
        if builder.ctx.chain(ref)[0] in builder.env:
            raise FusionError("stack of a value inside the kernel")
        value = builder.ctx.external(ref)
        strides = broadcast_strides(value.shape, value.strides, each)
        load = Load(builder._arg(value), offset_of(local, each, strides), "full")
        pieces.append(Expr("load", attr=load))
    result = pieces[-1]
    for i in reversed(range(len(pieces) - 1)):
        result = call("where", call("lt", pos, const(i + 1)), pieces[i], result)
    return result


def glu_value(builder, op: dict[str, Any], index: Expr, shape: list[int]) -> Expr:
    """F.glu of a tensor made outside the kernel: the first half along the dim times the
    sigmoid of the second, both read at the element's coordinates."""
    source = op["argv"][0]
    if builder.ctx.chain(source)[0] in builder.env:
        raise FusionError("glu of a value inside the kernel")
    value = builder.ctx.external(source)
    dim = (op["argv"][1] if len(op["argv"]) > 1 else op.get("kwargv", {}).get("dim", -1)) % len(
        shape
    )
    first = offset_of(index, shape, value.strides)
    second = Expr("iadd", (first, const(shape[dim] * value.strides[dim])))
    arg = builder._arg(value)
    a, b = (Expr("load", attr=Load(arg, at, "full")) for at in (first, second))
    return call("mul", a, call("sigmoid", b))


def gather_value(builder, op: dict[str, Any], index: Expr, shape: list[int]) -> Expr:
    """torch.gather(x, dim, idx): the output has idx's shape; along dim each element reads
    the position idx holds there (tools/builtin/indexing.py), along the others its own."""
    source, positions = index_operands(builder, op["argv"][0], op["argv"][2])
    dim = op["argv"][1] % len(shape)
    coords = _coords(index, shape)
    held_at = offset_of(index, shape, list(positions.strides))
    coords[dim] = loaded_position(builder, positions, held_at, source.shape[dim])
    return Expr("load", attr=Load(builder._arg(source), _at(coords, source.strides), "full"))


CONCATS = {"cat": cat_value, "stack": stack_value, "constant_pad_nd": pad_value, "glu": glu_value,
           "gather": gather_value, **INDEXING}  # fmt: skip
