"""One group of traced ops → one kernel: expressions over the group's index space.

`build_group` walks the group's ops in order, keeping each in-group result as an expression and
loading everything else (inputs, parameters, other groups' results, through their views) as a
kernel argument. A result that other groups or the model's outputs need is stored. Anything
that does not fit one kernel raises FusionError; the program builder then splits the group.
"""

from __future__ import annotations

import math
from typing import Any

from kernelgraph.tools.builtin.conv import CONVOLUTIONS, conv_kernel, conv_spec
from kernelgraph.tools.builtin.errors import FusionError
from kernelgraph.tools.builtin.expr import (
    Expr,
    Load,
    _merge,
    as_expr,
    broadcast_strides,
    call,
    const,
    contiguous_strides,
    offset_of,
    var,
    walk,
)
from kernelgraph.tools.builtin.gathers import CONCATS, GATHERS
from kernelgraph.tools.builtin.group_types import (
    GEMMS,
    RESHAPES,
    VECTOR_PRODUCTS,
    GroupContext,
    GroupResult,
    InGroup,
    Space,
    collapse,
    op_name,
)
from kernelgraph.tools.builtin.hoisting import extract_reductions
from kernelgraph.tools.builtin.kernels import (
    FusedKernel,
    GemmKernel,
    Operand,
    Store,
    numel,
)
from kernelgraph.tools.builtin.lowering import Position, lower_pointwise
from kernelgraph.tools.builtin.pooling import pool_kernel, pool_key, pool_spec
from kernelgraph.tools.builtin.reductions import ROW_OPS, RowLowering, row_key
from kernelgraph.tools.builtin.values import Value


class _RowArgs:
    def __init__(self, builder: GroupBuilder, op: dict, index: int) -> None:
        self.b, self.op, self.index = builder, op, index
        self.values = op.get("argv") or []
        self.kwargs = {k: v for k, v in (op.get("kwargv") or {}).items()}
        shapes = op.get("arg_shapes") or [[]]
        self.in_shape = list(shapes[0])

    def x(self) -> Expr:
        return self.b.operand(self.values[0], list(self.in_shape), "full")

    def full(self, i: int, shape: list[int], place: list[int] | None = None) -> Expr:
        return as_expr(self.b.operand(self.values[i], shape, "full", place))

    def row(self, i: int, shape: list[int]) -> Expr:
        return as_expr(self.b.operand(self.values[i], shape, "row"))

    def present(self, i: int) -> bool:
        return len(self.values) > i and isinstance(self.values[i], dict) and "t" in self.values[i]


class _Probe:
    """RowArgs that only answer the space (for choosing the group's space up front)."""

    def __init__(self, op: dict) -> None:
        self.values = op.get("argv") or []
        self.kwargs = dict(op.get("kwargv") or {})
        self.in_shape = list((op.get("arg_shapes") or [[]])[0])

    def x(self) -> Expr:
        return const(0.0)

    def full(self, i, shape, place=None) -> Expr:
        return const(0.0)

    def row(self, i, shape) -> Expr:
        return const(0.0)

    def present(self, i: int) -> bool:
        return len(self.values) > i and isinstance(self.values[i], dict) and "t" in self.values[i]


class GroupBuilder:
    def __init__(self, ctx: GroupContext, members: list[int], name: str) -> None:
        self.ctx, self.members, self.name = ctx, members, name
        self.member_set = set(members)
        self.env: dict[tuple[str, int], InGroup] = {}
        self.inputs: list[Value] = []
        self.arg_names: dict[str, str] = {}
        self.space = self._choose_space()

    # ------------------------------------------------------------ space and operands

    def _choose_space(self) -> Space:
        first = self.ctx.ops[self.members[0]]
        if op_name(first) in GEMMS:
            shape = first["outs"][0]["shape"] or [1]  # a dot product's is []
            return Space(numel(shape[:-1]), 1, shape[-1])
        for i in self.members:  # the first op that reduces sets the rows
            op = self.ctx.ops[i]
            key = row_key(op_name(op), op["overload"])
            if key is not None and (lowering := ROW_OPS[key](_Probe(op))).reduce_dims:
                return collapse(lowering.space, lowering.reduce_dims)
        biggest = max(numel(self.ctx.ops[i]["outs"][0]["shape"]) for i in self.members)
        return Space(biggest, 1, 1)

    def _arg(self, value: Value) -> str:
        if value.var not in self.arg_names:
            self.arg_names[value.var] = f"in{len(self.inputs)}"
            self.inputs.append(value)
        return self.arg_names[value.var]

    def operand(self, ref: Any, shape: list[int], space: str, place: list[int] | None = None):
        """Tensor argument `ref` as read by an op of output `shape` in `space`. A one-element
        constant whose number the analysis read ("v": torch.tensor(0.5)) is that number, as a
        Python scalar argument is."""
        if isinstance(ref, dict) and "f" in ref:  # a non-finite number: float("-inf")
            return float(ref["f"])
        if not (isinstance(ref, dict) and "t" in ref):
            return ref
        if "v" in ref:
            return ref["v"]
        key, views = self.ctx.chain(ref)
        if key in self.env:
            return self._in_group(self.env[key], views, shape, space, place)
        value = self.ctx.external(ref)
        if place is not None:
            strides = [0] * len(shape)
            for d, s in zip(place, value.strides, strict=True):
                strides[d] = s
        else:
            try:
                strides = broadcast_strides(value.shape, value.strides, shape)
            except ValueError as exc:
                raise FusionError(str(exc)) from exc
        index = var("idx") if space == "full" else var("k")
        load = Load(self._arg(value), offset_of(index, shape, strides), space)
        return Expr("load", attr=load)

    def _in_group(
        self, held: InGroup, views: list[tuple[int, int]], shape: list[int], space: str, place=None
    ) -> Expr:
        current = list(held.shape)
        for v, slot in views:
            op = self.ctx.ops[v]
            out = op["outs"][slot]["shape"]
            if op_name(op) not in RESHAPES or numel(out) != numel(current):
                raise FusionError(f"{op['op']} of a value inside the kernel")
            current = list(out)
        if held.space == space or (held.space == "acc" and space == "full"):
            if numel(current) != numel(shape):
                raise FusionError("a value broadcast inside the kernel")
            if place is not None and list(place) != sorted(place):
                raise FusionError("a value inside the kernel read with its dims permuted")
            return held.expr
        if held.space == "row" and space == "full":
            strides = _placed(current, shape, place)
            if strides is None or _merge(shape, strides) != self.space.row_pattern():
                raise FusionError("a row value broadcast along another axis")
            return held.expr
        raise FusionError("a full-size value used per row")

    def _space_of(self, shape: list[int]) -> str:
        n = numel(shape)
        if n == self.space.full:
            return "full"
        if self.space.rlen > 1 and n == self.space.rows:
            return "row"
        raise FusionError(f"an op of {n} elements in a kernel over {self.space.full}")

    # ------------------------------------------------------------ ops

    def add(self, index: int) -> None:
        op = self.ctx.ops[index]
        name = op_name(op)
        key = row_key(name, op["overload"])
        if name in GEMMS:
            self._gemm(index, op, name)
        elif name in CONVOLUTIONS:
            self._conv(index, op)
        elif name in GATHERS or name in CONCATS:
            self._gather(index, op, name)
        elif pool_key(name) is not None:
            self._pool(index, op)
        elif key is not None:
            self._row(index, op, key)
        else:
            shape = op["outs"][0]["shape"]
            space = self._space_of(shape)
            args = [self.operand(a, shape, space) for a in op.get("argv") or []]
            kwargs = {k: self.operand(v, shape, space) for k, v in (op.get("kwargv") or {}).items()}
            at = Position(var("idx") if space == "full" else var("k"), tuple(shape))
            expr = lower_pointwise(name, op["overload"], args, kwargs, at)
            self.env[(f"op:{index}", 0)] = InGroup(expr, space, shape)

    def _gather(self, index: int, op: dict, name: str) -> None:
        """A layout op (repeat, flip) of a tensor made outside the kernel: a load at an offset
        that the op's gather computes (tools/builtin/gathers.py)."""
        source, shape = op["argv"][0], op["outs"][0]["shape"]
        if name in CONCATS:  # several sources: the concat builds the expression
            space = self._space_of(shape)
            expr = CONCATS[name](self, op, var("idx") if space == "full" else var("k"), shape)
            self.env[(f"op:{index}", 0)] = InGroup(expr, space, shape)
            return
        key, views = self.ctx.chain(source)
        if key in self.env:
            raise FusionError(f"{name} of a value inside the kernel")
        value = self.ctx.external(source)
        space = self._space_of(shape)
        index_var = var("idx") if space == "full" else var("k")
        offset = GATHERS[name](op, index_var, shape, value)
        load = Expr("load", attr=Load(self._arg(value), offset, space))
        self.env[(f"op:{index}", 0)] = InGroup(load, space, shape)

    def _row(self, index: int, op: dict, key: str) -> None:
        lowering: RowLowering = ROW_OPS[key](_RowArgs(self, op, index))
        space = collapse(lowering.space, lowering.reduce_dims)
        if lowering.reduce_dims and space != self.space and space.rlen > 1:
            raise FusionError("two reductions over different axes")
        for slot, (expr, out) in enumerate(zip(lowering.outputs, op["outs"], strict=False)):
            if expr is not None:
                self.env[(f"op:{index}", slot)] = InGroup(expr, self._space_of(out["shape"]),
                                                          out["shape"])  # fmt: skip

    def _pool(self, index: int, op: dict) -> None:
        """A pool anchors its kernel, like a GEMM: what follows is its epilogue over var("acc")
        (the pooled value) and var("arg") (max pooling's indices)."""
        shape = op["outs"][0]["shape"]
        if index != self.members[0] or self.space.rlen > 1 or self.space.full != numel(shape):
            raise FusionError("a pool inside a fused kernel")
        x = self.ctx.external(op["argv"][0])
        self.pool = (pool_spec(op), x, self._arg(x), shape)
        for slot, out in enumerate(op["outs"]):
            self.env[(f"op:{index}", slot)] = InGroup(var(("acc", "arg")[slot]), "acc",
                                                      out["shape"])  # fmt: skip

    def _conv(self, index: int, op: dict) -> None:
        """A convolution anchors its kernel, like a GEMM: var("acc") is its value, bias added."""
        shape = op["outs"][0]["shape"]
        if index != self.members[0] or self.space.full != numel(shape):
            raise FusionError("a convolution inside a fused kernel")
        x, w = (self.ctx.external(ref) for ref in op["argv"][:2])
        self.conv = (conv_spec(op), x, w, (self._arg(x), self._arg(w)), shape)
        acc: Expr = var("acc")
        if isinstance(op["argv"][2], dict):
            acc = call("add", acc, as_expr(self.operand(op["argv"][2], shape, "full", [1])))
        self.env[(f"op:{index}", 0)] = InGroup(acc, "acc", shape)

    def _gemm(self, index: int, op: dict, name: str) -> None:
        if index != self.members[0]:
            raise FusionError("a matrix product inside a fused kernel")
        argv = op["argv"]
        biased = name.startswith(("addmm", "baddbmm", "addmv"))
        bias, (a_ref, b_ref) = (argv[0], argv[1:3]) if biased else (None, argv[0:2])
        a_val, b_val = self.ctx.external(a_ref), self.ctx.external(b_ref)
        shape = op["outs"][0]["shape"]
        if name in VECTOR_PRODUCTS:  # [M, K] @ [K] or [K] . [K]: N = 1, a 1-D A is one row
            m = a_val.shape[0] if len(a_val.shape) == 2 else 1
            a_strides = (0, *a_val.strides) if len(a_val.shape) == 2 else (0, 0, a_val.strides[0])
            self.gemm = (
                a_val,
                b_val,
                1,
                m,
                1,
                a_val.shape[-1],
                a_strides,
                (0, b_val.strides[0], 0),
            )
        else:
            batch = shape[0] if len(shape) == 3 else 1
            strides = (_gemm_strides(a_val, batch), _gemm_strides(b_val, batch))
            self.gemm = (a_val, b_val, batch, shape[-2], shape[-1], a_val.shape[-1], *strides)
        acc: Expr = var("acc")
        kwargs = op.get("kwargv") or {}
        alpha = argv[4] if len(argv) > 4 else kwargs.get("alpha", 1)
        beta = argv[3] if len(argv) > 3 else kwargs.get("beta", 1)
        if alpha != 1:
            acc = call("mul", acc, const(alpha))
        if bias is not None and beta != 0:
            term = as_expr(self.operand(bias, shape, "full"))
            acc = call("add", acc, term if beta == 1 else call("mul", term, const(beta)))
        self.env[(f"op:{index}", 0)] = InGroup(acc, "acc", shape)

    # ------------------------------------------------------------ result

    def finish(self, kind: str) -> GroupResult:
        stores, outputs, integers = [], [], set()
        for (label, slot), held in self.env.items():
            index = int(label[3:])
            if not self.ctx.needed_outside((label, slot), self.member_set):
                continue
            arg = f"out{len(outputs)}"
            dtype = self.ctx.out_dtype(index, slot)
            outputs.append(((label, slot), held.shape, dtype))
            if not dtype.startswith(("float", "bfloat")):
                integers.add(arg)
            space = "row" if held.space == "row" else "full"
            stores.append(Store(arg, held.expr, space))
        if not stores:
            raise FusionError("a group with no result")
        names = [f"out{i}" for i in range(len(outputs))]
        inputs = [self.arg_names[v.var] for v in self.inputs]
        if hasattr(self, "gemm"):
            kernel = self._gemm_kernel(stores, inputs, names)
        elif hasattr(self, "conv"):
            if any(node.op == "reduce" for s in stores for node in walk(s.value)):
                raise FusionError("a reduction after a convolution")
            spec, x, w, args, shape = self.conv
            kernel = conv_kernel(self.name, spec, x, w, args, shape, stores, inputs, names)
        elif hasattr(self, "pool"):
            if any(node.op == "reduce" for s in stores for node in walk(s.value)):
                raise FusionError("a reduction after a pool")
            spec, x, source, shape = self.pool
            kernel = pool_kernel(self.name, spec, x, source, shape, stores, inputs, names)
        else:
            kernel = self._fused_kernel(stores, inputs, names, kind)
            kernel.integer_outputs = frozenset(integers)
        return GroupResult(kernel, list(self.inputs), outputs)

    def _fused_kernel(self, stores, inputs, names, kind) -> FusedKernel:
        stores, reductions = extract_reductions(stores)
        space = self.space
        if not reductions:  # nothing reduced: one flat pointwise space
            space = Space(space.full, 1, 1)
            stores = [Store(s.arg, s.value, "full") for s in stores]
        return FusedKernel(self.name, space.outer, space.rlen, space.inner, inputs, names,
                           reductions, stores, kind)  # fmt: skip

    def _gemm_kernel(self, stores, inputs, names) -> GemmKernel:
        a_val, b_val, batch, m, n, k, a_strides, b_strides = self.gemm
        for s in stores:
            if any(node.op == "reduce" for node in walk(s.value)):
                raise FusionError("a reduction after a matrix product")
        a = Operand(self._arg(a_val), a_strides)
        b = Operand(self._arg(b_val), b_strides)
        inputs = [self.arg_names[v.var] for v in self.inputs]
        return GemmKernel(self.name, batch, m, n, k, a, b, inputs, names, stores)


def _placed(current: list[int], shape: list[int], place: list[int] | None) -> list[int] | None:
    """Strides of a contiguous `current`-shaped value read by an op of `shape`: broadcast
    (numpy rules), or its dims put at `place`. None when it does not fit."""
    own = contiguous_strides(current)
    if place is None:
        try:
            return broadcast_strides(current, own, shape)
        except ValueError:
            return None
    strides = [0] * len(shape)
    for d, stride in zip(place, own, strict=True):
        strides[d] = stride
    return strides


def _gemm_strides(value: Value, batch: int) -> tuple[int, int, int]:
    strides = list(value.strides)
    if len(strides) == 2:
        return (0, strides[0], strides[1])
    if value.shape[0] == 1 and batch > 1:
        return (0, strides[1], strides[2])
    return (strides[0], strides[1], strides[2])


# Builders for groups that are not expressions over one index space (scans:
# tools/builtin/scans.py), each with `claims(ctx, members) -> bool`; the first that claims wins.
BUILDERS: list[Any] = []


def build_group(ctx: GroupContext, members: list[int], name: str, kind: str) -> GroupResult:
    chosen = next((b for b in BUILDERS if b.claims(ctx, members)), GroupBuilder)
    builder = chosen(ctx, members, name)
    for index in members:
        builder.add(index)
    return builder.finish(kind)


__all__ = ["GroupContext", "GroupResult", "build_group", "collapse", "math"]
