"""Loads at positions read from an index tensor: index_select, embedding, and advanced
indexing by one tensor (`x[idx]`, `x[:, idx]`); gather (gathers.py) uses its helpers.

Both tensors are made outside the kernel. Element `index` of the output has coordinates
(outer, j, within): `j` is a flat position into the index tensor, the rest the source's own
coordinates around the indexed dim. The index value, loaded as kernels load every value (fp32),
becomes an integer offset through `ival`; fp32 holds every integer below 2**24 exactly, so a dim
longer than that is refused. A negative index counts from the end, as torch's indexing does.
Registered in gathers.CONCATS (builders of whole expressions from several tensors).
"""

from __future__ import annotations

import math
from typing import Any

from kernelgraph.tools.builtin.errors import FusionError, Unsupported
from kernelgraph.tools.builtin.expr import Expr, Load, call, const, index_op, offset_of

EXACT_INDEX_LIMIT = 1 << 24  # integers fp32 holds exactly


def _external(builder, ref: dict, what: str):
    if builder.ctx.chain(ref)[0] in builder.env:
        raise FusionError(f"{what} of a value inside the kernel")
    return builder.ctx.external(ref)


def index_operands(builder, source_ref: dict, index_ref: dict):
    """The source and the index tensor (integers: positions, not a mask), both made outside."""
    source = _external(builder, source_ref, "indexing")
    positions = _external(builder, index_ref, "indexing")
    if "int" not in positions.dtype:
        raise Unsupported(
            f"indexing by a {positions.dtype} tensor (a mask or values, not positions)"
        )
    return source, positions


def loaded_position(builder, positions, offset: Expr, size: int) -> Expr:
    """The position the index tensor holds at `offset`, as an offset Expr; a negative one
    counts from the end."""
    if size >= EXACT_INDEX_LIMIT:
        raise Unsupported(f"indexing a dim of {size} positions (fp32 holds indices below 2**24)")
    picked = Expr("load", attr=Load(builder._arg(positions), offset, "full"))
    wrapped = call("add", picked, const(float(size)))
    return Expr(
        "ival", (call("where", call("lt", picked, const(0.0)), wrapped, picked),), attr=size
    )


def _indexed(builder, source_ref: dict, dim: int, index_ref: dict, index: Expr) -> Expr:
    """Along `dim` the position the index tensor holds at the element's place in it, around it
    the element's own coordinates (the output is source.shape with dim replaced by idx.shape)."""
    source, positions = index_operands(builder, source_ref, index_ref)
    dim %= max(len(source.shape), 1)
    size = source.shape[dim]
    count, inner = math.prod(positions.shape), math.prod(source.shape[dim + 1 :])
    j = index_op("imod", index_op("idiv", index, inner), count)
    outer, within = index_op("idiv", index, inner * count), index_op("imod", index, inner)
    at = loaded_position(
        builder, positions, offset_of(j, list(positions.shape), list(positions.strides)), size
    )
    flat = Expr("iadd", (index_op("imul", outer, size * inner), index_op("imul", at, inner)))
    if inner > 1:
        flat = Expr("iadd", (flat, within))
    offset = offset_of(flat, list(source.shape), list(source.strides))
    return Expr("load", attr=Load(builder._arg(source), offset, "full"))


def index_select_value(builder, op: dict[str, Any], index: Expr, shape: list[int]) -> Expr:
    """torch.index_select(x, dim, idx)."""
    source, dim, positions = op["argv"][:3]
    return _indexed(builder, source, dim, positions, index)


def embedding_value(builder, op: dict[str, Any], index: Expr, shape: list[int]) -> Expr:
    """F.embedding(idx, weight): rows of the weight (padding_idx only changes the gradient)."""
    weight, positions = op["argv"][:2]
    return _indexed(builder, weight, 0, positions, index)


def tensor_index_value(builder, op: dict[str, Any], index: Expr, shape: list[int]) -> Expr:
    """x[..., idx, ...] with one index tensor; the dims before it taken whole (None)."""
    source, indices = op["argv"][:2]
    given = [d for d, ref in enumerate(indices) if ref is not None]
    if len(given) != 1:
        raise Unsupported("advanced indexing by more than one tensor")
    return _indexed(builder, source, given[0], indices[given[0]], index)


INDEXING = {"index_select": index_select_value, "embedding": embedding_value,
            "index": tensor_index_value}  # fmt: skip
