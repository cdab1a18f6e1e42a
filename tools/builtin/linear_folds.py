"""A linear reduction over a GEMM's output columns, folded into the GEMM's weights.

`sum_n (x @ B + b)[:, n] = x @ (sum_n B[:, n]) + sum_n b[n]`: a sum, a mean or an average pool
over the N axis of `x @ B (+ b)`, through views and per-column affine ops (adding, subtracting,
multiplying or dividing by a number or a vector along N), is the same product with B's columns
reduced first. KernelBench's level2/51 (a mean over 8192 outputs) and 98 (`AvgPool1d(16)`) then
multiply by one column or by 512 instead of 8192: a GEMV or a sixteenth of the GEMM, after a
reduction of B that reads it once.

`fold_linear_reductions(analysis)` rewrites the traced op list before the program groups it:
the new ops (B's columns reduced, the constant term reduced, the smaller product) go in just
before the reduction, whose place takes a view of the product shaped as the reduction's output.
The old GEMM and the ops between are then read by nothing and are not written. Every op label
after the insertion moves up, and the stages are rebuilt from the new list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kernelgraph.tools.analysis.ops import GEMM, POINTWISE, REDUCTION, VIEW
from kernelgraph.tools.analysis.stages import build_stages
from kernelgraph.tools.builtin.group_types import op_name

GEMMS = {"aten.mm.default": 0, "aten.addmm.default": 1}  # name -> position of A
RESHAPES = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze"}
AFFINE = {"add", "sub", "mul", "div", "neg"}
MULTIPLICATIVE = {"mul", "div", "neg"}
AVG_POOLS = {"avg_pool1d": 1, "avg_pool2d": 2, "avg_pool3d": 3}
NOTE = (
    "the {reduce} over the GEMM's {n} output columns (windows of {k}) is folded into its "
    "weights: B's columns are reduced first, then x @ B' has {m} column(s)"
)
LABEL = re.compile(r"^op:(\d+)$")


@dataclass
class Fold:
    """What one match found: the reduction at `at`, its kind, window and the GEMM's parts."""

    at: int
    reduce: str  # "sum" | "mean"
    k: int  # columns a window (N for a sum or mean over the whole row)
    m: int
    n: int
    kdim: int
    a: dict
    b: dict
    bias: dict | None
    bias_shape: list[int]
    chain: list[dict] = field(default_factory=list)  # the affine ops, in forward order
    out_shape: list[int] = field(default_factory=list)
    dtype: str = "float32"


def fold_linear_reductions(analysis: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The analysis with every foldable reduction folded, and a note for each fold."""
    notes: list[str] = []
    for _ in range(len(analysis.get("ops") or [])):
        ops = analysis.get("ops") or []
        fold = next((f for i in range(len(ops)) if (f := match(analysis, i))), None)
        if fold is None:
            break
        analysis = _apply(analysis, fold)
        notes.append(NOTE.format(reduce=fold.reduce, n=fold.n, k=fold.k, m=fold.n // fold.k))
    return analysis, notes


def _readers(analysis: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in analysis.get("ops") or []:
        for label in op.get("reads") or []:
            counts[label] = counts.get(label, 0) + 1
    for out in analysis.get("outputs") or []:
        label = (out.get("ref") or {}).get("t")
        if label:
            counts[label] = counts.get(label, 0) + 1
    return counts


def match(analysis: dict[str, Any], at: int) -> Fold | None:
    """The fold whose reduction is op `at`, or None."""
    ops = analysis["ops"]
    window = _window(ops[at])
    if window is None:
        return None
    reduce, k, source = window
    readers = _readers(analysis)
    chain: list[dict] = []
    views: list[dict] = []
    while True:
        if not isinstance(source, dict) or not LABEL.match(source.get("t", "")):
            return None
        if source.get("o", 0) or readers.get(source["t"], 0) != 1:
            return None  # the GEMM or a step of the chain is read elsewhere: it stays
        op = ops[int(source["t"][3:])]
        name = f"{op['op']}.{op['overload']}"
        if name in GEMMS:
            break
        if op.get("kind") == VIEW and op_name(op) in RESHAPES:
            views.append(op)
            source = op["argv"][0]
            continue
        if op.get("kind") != POINTWISE or not _affine(op):
            return None
        chain.insert(0, op)
        source = _chain_operand(op)
    if any(view["outs"][0]["shape"][-1:] != op["shape"][-1:] for view in views):
        return None  # a reshape that moves N: rows no longer end where the GEMM's do
    return _fold(ops, at, op, reduce, k, chain)


def _fold(ops, at: int, gemm: dict, reduce: str, k: int, chain: list[dict]) -> Fold | None:
    if gemm.get("kwargv") or len(gemm["argv"]) != 2 + GEMMS[f"{gemm['op']}.{gemm['overload']}"]:
        return None  # addmm's beta or alpha
    first = GEMMS[f"{gemm['op']}.{gemm['overload']}"]
    shapes = gemm["arg_shapes"]
    (m, kdim), (kdim_b, n) = shapes[first], shapes[first + 1]
    if kdim != kdim_b or n % k or k < 2 or gemm["dtype"] != ops[at]["dtype"]:
        return None
    bias, bias_shape = (gemm["argv"][0], list(shapes[0])) if first else (None, [])
    if bias is not None and not _along_n(bias_shape, n, allow_scalar=False):
        return None
    for op in chain:
        carried = dict((id(a), s) for a, s in _tensor_args(op)).get(id(_chain_operand(op)))
        if op["outs"][0]["dtype"] != gemm["dtype"] or list(carried or []) != list(op["shape"]):
            return None  # a cast, or a broadcast that grows the GEMM's value
        other, shape = _other_operand(op)
        if isinstance(other, dict) and not _along_n(shape, n, allow_scalar=True):
            return None
    return Fold(at, reduce, k, m, n, kdim, gemm["argv"][first], gemm["argv"][first + 1], bias,
                bias_shape, chain, list(ops[at]["outs"][0]["shape"]), gemm["dtype"])  # fmt: skip


def _window(op: dict) -> tuple[str, int, dict] | None:
    """(reduce, columns a window, the reduced tensor) for a sum or mean over the last dim alone,
    or an average pool whose windows run along the last dim alone; else None."""
    name, shapes = op_name(op), op.get("arg_shapes") or [[]]
    argv, kwargs = op["argv"], op.get("kwargv") or {}
    rank = len(shapes[0])
    if name in ("sum", "mean") and op["overload"] in ("dim_IntList", "dim") and rank >= 2:
        dims = argv[1] if len(argv) > 1 else kwargs.get("dim")
        if kwargs.keys() - {"dim", "keepdim"} or len(argv) > 3 or not isinstance(dims, list):
            return None  # a dtype, or an output
        if [d % rank for d in dims] != [rank - 1]:
            return None
        return name, shapes[0][-1], argv[0]
    if name in AVG_POOLS and not kwargs:
        d = AVG_POOLS[name]
        args = list(argv) + [None] * (7 - len(argv))
        kernel = _per_dim(args[1], d)
        stride = _per_dim(args[2], d) or kernel
        padding = _per_dim(args[3] if args[3] is not None else 0, d)
        if not kernel or any(padding) or stride != kernel or args[6] is not None:
            return None  # padding, overlapping windows or a divisor override
        if rank < d + 1 or any(k != 1 for k in kernel[:-1]) or set(shapes[0][-d:-1]) - {1}:
            return None  # windows across more than the last dim
        return "mean", kernel[-1], argv[0]
    return None


def _per_dim(value: Any, d: int) -> list[int]:
    if isinstance(value, int):
        return [value] * d
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return value * d if len(value) == 1 else list(value)
    return []


def _affine(op: dict) -> bool:
    """An op of the chain: y + c, c + y, y - c, y * c, c * y, y / c or -y, c a number or a
    tensor (checked later to run along N); no alpha and no rounding mode."""
    name = op_name(op)
    if name not in AFFINE or op.get("kwargv"):
        return False
    refs = [a for a in op["argv"] if isinstance(a, dict)]
    if name == "neg":
        return len(op["argv"]) == 1
    if len(op["argv"]) != 2 or not refs:
        return False
    if len(refs) == 2 and refs[0].get("t") == refs[1].get("t"):
        return False  # y * y
    if name in ("sub", "div") and not isinstance(op["argv"][0], dict):
        return False  # c - y, c / y: not affine in y as written here
    return all(not isinstance(a, bool) for a in op["argv"])


def _chain_operand(op: dict) -> dict:
    """The argument that carries the GEMM's value: for sub and div the first; for add and mul
    the tensor argument whose shape is the op's own (the other runs along N)."""
    if op_name(op) in ("neg", "sub", "div"):
        return op["argv"][0]
    refs = _tensor_args(op)
    if len(refs) == 1:
        return refs[0][0]
    full = [a for a, s in refs if list(s) == list(op["shape"])]
    return full[0] if len(full) == 1 else {}


def _other_operand(op: dict) -> tuple[Any, list[int]]:
    """The argument of an affine op that is not the chain's: a number, or a ref and its shape."""
    if op_name(op) == "neg":
        return None, []
    chain = _chain_operand(op)
    shapes = {id(a): s for a, s in _tensor_args(op)}
    for arg in op["argv"]:
        if arg is not chain:
            return arg, list(shapes.get(id(arg), []))
    return None, []


def _tensor_args(op: dict) -> list[tuple[dict, list[int]]]:
    """(ref, shape) of each tensor argument: `arg_shapes` lists the tensors' shapes alone."""
    refs = [a for a in op["argv"] if isinstance(a, dict)]
    return list(zip(refs, op.get("arg_shapes") or [], strict=False))


def _along_n(shape: list[int], n: int, allow_scalar: bool) -> bool:
    """A tensor the same for every row: ones, then n or 1 last (or one element, if allowed)."""
    if any(d != 1 for d in shape[:-1]):
        return False
    last = shape[-1] if shape else 1
    return last == n or (allow_scalar and last == 1)


class _Emitter:
    """New ops appended to a list, labelled from `base`, in the analysis's op format."""

    def __init__(self, base: int, dtype: str):
        self.ops: list[dict[str, Any]] = []
        self.base, self.dtype = base, dtype

    def add(self, name: str, kind: str, argv: list, shape: list[int], flops: int = 0) -> dict:
        refs = [a for a in argv if isinstance(a, dict)]
        op, overload = name.rsplit(".", 1)
        self.ops.append({
            "op": op, "overload": overload, "kind": kind, "shape": shape, "dtype": self.dtype,
            "args": f"(folded) {name}", "reads": [r["t"] for r in refs],
            "arg_shapes": [r["shape"] for r in refs], "flops": flops,
            "argv": [_bare(a) for a in argv], "kwargv": {},
            "outs": [{"shape": shape, "dtype": self.dtype}],
        })  # fmt: skip
        return {"t": f"op:{self.base + len(self.ops) - 1}", "o": 0, "shape": shape}

    def flat(self, ref: dict) -> dict:
        """A tensor of ones-then-last shape as a 1-D view (its size-1 dims dropped)."""
        shape = ref["shape"]
        if len(shape) == 1:
            return ref
        return self.add("aten.view.default", VIEW, [ref, shape[-1:] or [1]], shape[-1:] or [1])

    def pointwise(self, name: str, left: Any, right: Any) -> dict:
        shapes = [a["shape"] for a in (left, right) if isinstance(a, dict)]
        shape = max(shapes, key=lambda s: s[-1] if s else 1)
        overload = "Tensor" if isinstance(left, dict) else "Scalar"
        return self.add(f"aten.{name}.{overload}", POINTWISE, [left, right], list(shape))

    def reduce_windows(self, ref: dict, reduce: str, k: int, axis: int = -1) -> dict:
        """Axis `axis` (the last, or the first of two) of `ref` reduced in windows of k: N ->
        N / k, kept as a dim of 1 when k is N."""
        shape = list(ref["shape"])
        axis %= len(shape)
        n = shape[axis]
        name = "aten.sum.dim_IntList" if reduce == "sum" else "aten.mean.dim"
        if k == n:
            kept = [*shape[:axis], 1, *shape[axis + 1 :]]
            return self.add(name, REDUCTION, [ref, [axis], True], kept)
        split = [*shape[:axis], n // k, k, *shape[axis + 1 :]]
        windows = self.add("aten.view.default", VIEW, [ref, split], split)
        reduced = [*shape[:axis], n // k, *shape[axis + 1 :]]
        return self.add(name, REDUCTION, [windows, [axis + 1], False], reduced)


def _bare(arg: Any) -> Any:
    return {"t": arg["t"], "o": arg.get("o", 0)} if isinstance(arg, dict) else arg


def _apply(analysis: dict[str, Any], fold: Fold) -> dict[str, Any]:
    ops = analysis["ops"]
    emit = _Emitter(fold.at, fold.dtype)
    shapes = {}  # label -> shape, for the refs the new ops read

    def sized(ref: dict, shape: list[int]) -> dict:
        shapes[ref["t"]] = shape
        return {**ref, "shape": list(shape)}

    # B's columns scaled as the GEMM's outputs are, then reduced in windows. A linear layer's
    # B is W.t(): W's rows are reduced instead, each read along its contiguous length.
    rows = _transposed_source(ops, fold.b, [fold.kdim, fold.n])
    weights = sized(rows, [fold.n, fold.kdim]) if rows else sized(fold.b, [fold.kdim, fold.n])
    for op in fold.chain:
        name = op_name(op)
        if name not in MULTIPLICATIVE:
            continue
        if name == "neg":
            weights = emit.add("aten.neg.default", POINTWISE, [weights], weights["shape"])
            continue
        other, shape = _other_operand(op)
        factor = emit.flat(sized(other, shape)) if isinstance(other, dict) else other
        if rows and isinstance(factor, dict):  # a factor a column of B is one a row of W
            factor = emit.add("aten.view.default", VIEW, [factor, [*factor["shape"], 1]],
                              [*factor["shape"], 1])  # fmt: skip
        weights = emit.pointwise(name, weights, factor)
    folded = emit.reduce_windows(weights, fold.reduce, fold.k, axis=0 if rows else -1)
    if rows:
        folded = emit.add("aten.t.default", VIEW, [folded], folded["shape"][::-1])

    constant = _constant(emit, fold, sized)
    columns = fold.n // fold.k
    flops = 2 * fold.m * fold.kdim * columns
    a = sized(fold.a, [fold.m, fold.kdim])
    if isinstance(constant, dict):
        product = emit.add("aten.addmm.default", GEMM, [constant, a, folded],
                           [fold.m, columns], flops)  # fmt: skip
    else:
        product = emit.add("aten.mm.default", GEMM, [a, folded], [fold.m, columns], flops)
        if constant is not None:
            product = emit.pointwise("add", product, constant)
    new = emit.ops
    for op in new:  # refs read with the right shapes (the emitter recorded them)
        op["arg_shapes"] = [shapes.get(label) or _shape_of(new, label, fold.at)
                            for label in op["reads"]]  # fmt: skip
    result = {**ops[fold.at], "op": "aten.view", "overload": "default", "kind": VIEW,
              "argv": [_bare(product), list(fold.out_shape)], "kwargv": {},
              "reads": [product["t"]], "arg_shapes": [[fold.m, columns]], "flops": 0}  # fmt: skip
    for key in ("group", "composite", "composite_kind"):
        result.pop(key, None)
    shift = len(new)
    moved = _relabel(ops[fold.at + 1 :], fold.at, shift)
    new_ops = [*ops[: fold.at], *new, result, *moved]
    outputs = _relabel(analysis.get("outputs") or [], fold.at, shift)
    return {**analysis, "ops": new_ops, "stages": build_stages(new_ops), "outputs": outputs}


def _constant(emit: _Emitter, fold: Fold, sized) -> dict | float | None:
    """The GEMM's constant term (its bias through the chain) reduced in windows: a [N / k]
    tensor, a number, or None where there is none."""
    value: Any = emit.flat(sized(fold.bias, fold.bias_shape)) if fold.bias is not None else None
    for op in fold.chain:
        name = op_name(op)
        other, shape = _other_operand(op)
        if isinstance(other, dict):
            other = emit.flat(sized(other, shape))
        if name == "neg":
            value = _negate(emit, value)
        elif name in ("add", "sub"):
            term = other if name == "add" else _negate(emit, other)
            value = term if value is None else _combine(emit, "add", value, term)
        elif value is not None:  # mul, div: a constant term scales with the rest
            value = _combine(emit, name, value, other)
    if value is None:
        return None
    if not isinstance(value, dict):
        return value * fold.k if fold.reduce == "sum" else value
    if value["shape"] == [1]:  # one number a column, kept as a tensor
        if fold.reduce == "sum":
            return emit.pointwise("mul", value, fold.k)
        return value
    return emit.reduce_windows(value, fold.reduce, fold.k)


def _negate(emit: _Emitter, value: Any) -> Any:
    if value is None or not isinstance(value, dict):
        return None if value is None else -value
    return emit.add("aten.neg.default", POINTWISE, [value], value["shape"])


def _combine(emit: _Emitter, name: str, left: Any, right: Any) -> Any:
    """left (op) right, either a number or a 1-D tensor."""
    if not isinstance(left, dict) and not isinstance(right, dict):
        return {"add": left + right, "mul": left * right, "div": left / right}[name]
    if not isinstance(left, dict):
        if name == "div":
            reciprocal = emit.add("aten.reciprocal.default", POINTWISE, [right], right["shape"])
            return emit.pointwise("mul", reciprocal, left)
        left, right = right, left  # add and mul commute
    return emit.pointwise(name, left, right)


def _transposed_source(ops: list[dict], ref: dict, shape: list[int]) -> dict | None:
    """The 2-D tensor that `ref` views transposed (`W.t()`, `W.T`, `permute(1, 0)`), or None."""
    label = ref.get("t", "")
    if not LABEL.match(label) or len(shape) != 2:
        return None
    op = ops[int(label[3:])]
    name, argv = op_name(op), op["argv"]
    transposes = (
        name == "t"
        or (name == "permute" and len(argv) > 1 and argv[1] == [1, 0])
        or (name == "transpose" and len(argv) > 2 and {argv[1] % 2, argv[2] % 2} == {0, 1})
    )
    source_shape = (op.get("arg_shapes") or [[]])[0]
    if op.get("kind") != VIEW or not transposes or list(source_shape) != shape[::-1]:
        return None
    return argv[0] if isinstance(argv[0], dict) else None


def _shape_of(new: list[dict], label: str, base: int) -> list[int]:
    return new[int(label[3:]) - base]["outs"][0]["shape"]


def _relabel(value: Any, at: int, shift: int) -> Any:
    """`value` with every op label from `at` on moved up by `shift`."""
    if isinstance(value, str):
        found = LABEL.match(value)
        if found and int(found.group(1)) >= at:
            return f"op:{int(found.group(1)) + shift}"
        return value
    if isinstance(value, list):
        return [_relabel(v, at, shift) for v in value]
    if isinstance(value, dict):
        return {k: _relabel(v, at, shift) for k, v in value.items()}
    return value
