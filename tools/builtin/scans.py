"""Scans (cumsum, cumprod, logcumsumexp) as kernels of their own: a running sum, product or
log-sum-exp along one dim.

A `ScanKernel` works in the [outer, rlen, inner] space of the scanned dim (rlen is its length;
a row is one (outer, inner) pair, numbered k, as in tools/builtin/kernels.py). Its `value` is
the full-space expression scanned (pointwise prologue fused: x * mask), var("s") the running
result at the element; each store writes an expression of s and loads at `offset` of its
contiguous output. Besides var("idx") (the element's flat index), expressions may use
var("fidx"): the index of its mirror along the scanned dim.

Reverse cumsum traces as flip -> cumsum -> flip: the first flip is a load at fidx, the last
a store at fidx. Swapping idx and fidx everywhere while scanning from the row's end computes
the same thing (every position is just renamed by its mirror), so a kernel whose stores are
mostly at fidx is written that way round: reverse=True, plain loads and stores. The program
builder fuses a scan with the stages around it (`fuse_scan`), since the analysis puts flips
and the scan in stages of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kernelgraph.tools.builtin.errors import FusionError, Unsupported
from kernelgraph.tools.builtin.expr import (
    Expr,
    Load,
    broadcast_strides,
    contiguous_strides,
    offset_of,
    substitute,
    var,
    walk,
)
from kernelgraph.tools.builtin.gathers import CONCATS, GATHERS, fill_of, flipped_offset
from kernelgraph.tools.builtin.group_types import GroupResult, InGroup, Space, collapse, op_name
from kernelgraph.tools.builtin.groups import BUILDERS, GroupBuilder, build_group
from kernelgraph.tools.builtin.kernels import numel
from kernelgraph.tools.builtin.lowering import INDEXED, POINTWISE

# ATen op -> how the scan combines ("logsumexp": log(exp(a) + exp(b)), logcumsumexp's step)
SCAN_OPS = {"cumsum": "sum", "cumprod": "prod", "logcumsumexp": "logsumexp",
            "_logcumsumexp": "logsumexp"}  # fmt: skip
IDENTITY = {"sum": 0.0, "prod": 1.0, "logsumexp": float("-inf")}


@dataclass
class ScanStore:
    arg: str
    value: Expr  # may use var("s")
    offset: Expr  # where in the contiguous output


@dataclass
class ScanKernel:
    name: str
    outer: int
    rlen: int
    inner: int
    combine: str  # sum | prod | logsumexp
    value: Expr
    inputs: list[str]
    outputs: list[str]
    stores: list[ScanStore] = field(default_factory=list)
    reverse: bool = False  # scan from the row's end (each row's suffix)
    kind: str = "scan"

    @property
    def rows(self) -> int:
        return self.outer * self.inner

    @property
    def numel(self) -> int:
        return self.outer * self.rlen * self.inner

    def describe(self) -> str:
        way = "reverse " if self.reverse else ""
        return (f"{self.name}: {way}cumulative {self.combine} over {self.rows} rows of {self.rlen} "
                f"(stride {self.inner})")  # fmt: skip

    def axes(self) -> str:
        return f"{self.name}: rows (scanned axis in-program)"

    def grid(self) -> str:
        return "cdiv(rows, BLOCK_K)"

    def pseudo(self) -> str:
        return f"{self.name}: per row: s = scan_{self.combine}(row, carried across blocks); store"


def scan_dim(op: dict[str, Any]) -> int:
    dim = op["argv"][1] if len(op["argv"]) > 1 else op["kwargv"]["dim"]
    rank = len(op["outs"][0]["shape"])
    return dim % rank if rank else 0


def _is_scan(op: dict[str, Any]) -> bool:
    return op_name(op) in SCAN_OPS


def _pointwise(op: dict[str, Any]) -> bool:
    name = op_name(op)
    return name in POINTWISE or f"{name}.{op['overload']}" in POINTWISE or name in INDEXED


class ScanGroupBuilder(GroupBuilder):
    """A group around one scan: pointwise ops, gathers and concats before it, pointwise ops
    and flips of its result after it."""

    @staticmethod
    def claims(ctx, members: list[int]) -> bool:
        return any(_is_scan(ctx.ops[i]) for i in members)

    def __init__(self, ctx, members: list[int], name: str) -> None:
        self.scan: tuple[str, Expr] | None = None
        self.flipped: dict[tuple[str, int], tuple[Expr, Expr, list[int]]] = {}
        super().__init__(ctx, members, name)

    def _choose_space(self) -> Space:
        op = next(self.ctx.ops[i] for i in self.members if _is_scan(self.ctx.ops[i]))
        return collapse(list(op["outs"][0]["shape"]), [scan_dim(op)])

    def operand(self, ref: Any, shape: list[int], space: str, place: list[int] | None = None):
        if isinstance(ref, dict) and "t" in ref and self.ctx.chain(ref)[0] in self.flipped:
            raise FusionError("a flipped scan result used inside the kernel")
        return super().operand(ref, shape, space, place)

    def add(self, index: int) -> None:
        op = self.ctx.ops[index]
        name = op_name(op)
        if _is_scan(op):
            self._scan(index, op)
        elif name == "flip" and self.ctx.chain(op["argv"][0])[0] in self.env:
            self._flip_result(index, op)
        elif name in GATHERS or name in CONCATS or _pointwise(op):
            super().add(index)
        else:
            raise FusionError(f"{op['op']} in a scan kernel")

    def _scan(self, index: int, op: dict) -> None:
        shape = list(op["outs"][0]["shape"])
        if self.scan is not None or collapse(shape, [scan_dim(op)]) != self.space:
            raise FusionError("two scans in one kernel")
        value = self.operand(op["argv"][0], shape, "full")
        self.scan = (SCAN_OPS[op_name(op)], value)
        self.env[(f"op:{index}", 0)] = InGroup(var("s"), "full", shape)

    def _mirrored(self, op: dict) -> bool:
        """Whether a flip reverses the scanned dim alone (size-1 dims do not count)."""
        shape = op["outs"][0]["shape"]
        dims = {d % len(shape) for d in op["argv"][1] if shape[d % len(shape)] > 1}
        return collapse(list(shape), sorted(dims)) == self.space if dims else False

    def _gather(self, index: int, op: dict, name: str) -> None:
        if name != "flip" or not self._mirrored(op):
            return super()._gather(index, op, name)
        key, _ = self.ctx.chain(op["argv"][0])
        if key in self.env:
            raise FusionError("flip of a value inside the kernel")
        value = self.ctx.external(op["argv"][0])
        shape = list(op["outs"][0]["shape"])
        offset = offset_of(var("fidx"), shape, broadcast_strides(value.shape, value.strides, shape))
        load = Expr("load", attr=Load(self._arg(value), offset, "full"))
        self.env[(f"op:{index}", 0)] = InGroup(load, "full", shape)

    def _flip_result(self, index: int, op: dict) -> None:
        """flip of a value of this kernel: the same value, stored backwards along the dims."""
        key, views = self.ctx.chain(op["argv"][0])
        held = self.env[key]
        if views or held.space != "full":
            raise FusionError("a flip of a reshaped value inside the kernel")
        shape = list(op["outs"][0]["shape"])
        offset = var("fidx") if self._mirrored(op) else flipped_offset(
            var("idx"), shape, contiguous_strides(shape), list(op["argv"][1]))  # fmt: skip
        self.flipped[(f"op:{index}", 0)] = (held.expr, offset, shape)

    def finish(self, kind: str) -> GroupResult:
        if self.scan is None:
            raise FusionError("a scan group without its scan")
        held = [(key, h.expr, var("idx"), h.shape) for key, h in self.env.items()]
        held += [(key, *value) for key, value in self.flipped.items()]
        stores, outputs = [], []
        for key, expr, offset, shape in held:
            if not self.ctx.needed_outside(key, self.member_set):
                continue
            if any(n.op == "reduce" for n in walk(expr)) or numel(shape) != self.space.full:
                raise FusionError("a reduction or row value in a scan kernel")
            outputs.append((key, shape, self.ctx.out_dtype(int(key[0][3:]), key[1])))
            stores.append(ScanStore(f"out{len(stores)}", expr, offset))
        inputs = [self.arg_names[v.var] for v in self.inputs]
        combine, value = self.scan
        space = self.space
        kernel = ScanKernel(self.name, space.outer, space.rlen, space.inner, combine, value,
                            inputs, [s.arg for s in stores], stores)  # fmt: skip
        return GroupResult(_oriented(kernel), list(self.inputs), outputs)


BUILDERS.append(ScanGroupBuilder)


def _oriented(kernel: ScanKernel) -> ScanKernel:
    """The kernel scanned from the rows' end, idx and fidx swapped, when most stores are at
    fidx (reverse cumsum): loads and stores then run forwards through memory."""
    mirrored = sum(s.offset == var("fidx") for s in kernel.stores)
    if 2 * mirrored <= len(kernel.stores):
        return kernel
    swap = {"idx": var("fidx"), "fidx": var("idx")}
    stores = [ScanStore(s.arg, substitute(s.value, swap), substitute(s.offset, swap))
              for s in kernel.stores]  # fmt: skip
    return replace(kernel, value=substitute(kernel.value, swap), stores=stores,
                   reverse=not kernel.reverse)  # fmt: skip


def fuse_scan(program, members: list[int]) -> bool:
    """Fold `members` (a stage) into the kernel launched just before it when one of the two
    holds a scan and the stage reads that kernel's results: x * mask before a cumsum, the flips
    around one. False (nothing changed) when the combination does not build."""
    last = program.last_group
    if last is None or last[2] is not program.steps[-1]:
        return False
    combined = [*last[0], *members]
    if not any(_is_scan(program.ops[i]) for i in combined) or not program._reads(members, last[0]):
        return False
    try:
        result = build_group(program.context(), combined, last[2].kernel.name, "scan")
    except (FusionError, Unsupported):
        return False
    program.steps.remove(last[2])
    program._launch(result, combined, "scan")
    return True


def exclusive_scan(ops: list[dict[str, Any]], i: int, outputs=()) -> None:
    """cat((fill, scan(y)), dim) along the scanned dim, the fill the scan's identity (KernelBench's
    exclusive cumsum), equals scan(cat((fill, y)), dim): the fill scans to itself. Rewritten
    so, the cat is the scan's prologue and nothing goes through memory between the two. `ops[i]`
    (the cat) becomes the scan; the cat is appended and fused before it. Unchanged when the
    scan's result has another reader, or the pattern does not match."""
    cat = ops[i]
    if op_name(cat) != "cat" or not cat["argv"][0]:
        return
    rank = len(cat["outs"][0]["shape"])
    dim = (cat["argv"][1] if len(cat["argv"]) > 1 else cat["kwargv"].get("dim", 0)) % rank
    *prefix, last = cat["argv"][0]
    if not prefix or not last["t"].startswith("op:") or last.get("o", 0):
        return
    label = last["t"]
    scan = ops[int(label[3:])]
    if not _is_scan(scan) or scan_dim(scan) != dim or len(scan["argv"]) > 2 or scan["kwargv"]:
        return  # another dim, or a dtype argument
    identity = IDENTITY[SCAN_OPS[op_name(scan)]]
    if any(fill_of(_through_views(ops, ref)) != identity for ref in prefix):
        return
    others = [op for j, op in enumerate(ops) if j != i and label in (op.get("reads") or [])]
    if others or any(o.get("ref", {}).get("t") == label for o in outputs):
        return
    reads = [r for label_read in cat["reads"] for r in
             (scan["reads"] if label_read == label else [label_read])]  # fmt: skip
    ops.append({**cat, "argv": [[*prefix, scan["argv"][0]], dim], "kwargv": {}, "reads": reads,
                "arg_shapes": [*cat["arg_shapes"][:-1], scan["arg_shapes"][0]]})  # fmt: skip
    made = len(ops) - 1
    ops[i] = {**scan, "shape": cat["shape"], "outs": cat["outs"], "reads": [f"op:{made}"],
              "argv": [{"t": f"op:{made}", "o": 0}, dim], "arg_shapes": [cat["outs"][0]["shape"]],
              "fused_before": [made]}  # fmt: skip


def _through_views(ops: list[dict[str, Any]], ref: dict) -> dict[str, Any]:
    """The op that made the data behind `ref`, past its views ({} for an input)."""
    while isinstance(ref, dict) and ref.get("t", "").startswith("op:"):
        op = ops[int(ref["t"][3:])]
        if op.get("kind") != "view":
            return op
        ref = op["argv"][0]
    return {"op": "input.input"}
