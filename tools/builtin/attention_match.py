"""Which traced ops are one attention: the roles (q, k^T, v, scale, mask, output) of a chain
`bmm -> scales / one mask -> softmax over the last dim -> bmm` (tools/builtin/attention.py
makes the kernel).

Two sources: a stage the analysis marks as F.scaled_dot_product_attention (its ops are the
chain, plus whatever makes its mask), and attention written out by hand (`q @ k.transpose(-2,
-1) * scale`, `masked_fill`, `softmax`, `@ v`), found across stages by `manual_chains`. Under a
run's precision every float tensor has one dtype, so dtype casts are transparent, and so are
`clone`s (copies that make q, k or v contiguous before a bmm): the kernel reads through strides.
"""

from __future__ import annotations

import math
from typing import Any

from kernelgraph.tools.analysis.ops import ALLOC, NO_COMPUTE
from kernelgraph.tools.builtin.group_types import RESHAPES, op_name
from kernelgraph.tools.builtin.op_support import tensor_refs, writable

SOFTMAXES = frozenset({"_safe_softmax", "_softmax", "softmax"})
SCALES = {"mul": lambda s, x: s * x, "div": lambda s, x: s / x}
CAST_KWARGS = {"dtype", "layout", "device", "pin_memory", "memory_format"}
COPIES = frozenset({"_to_copy", "clone"})


def _is_copy(op: dict) -> bool:
    """A cast or a copy: the same values (under one precision) in another tensor."""
    return op_name(op) in COPIES and set(op.get("kwargv") or {}) <= CAST_KWARGS


def _number(value: Any) -> float | None:
    """A traced Python number (inf and nan come as {"f": "-inf"})."""
    if isinstance(value, dict) and set(value) == {"f"}:
        return float(value["f"])
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _is_scale(op: dict) -> bool:
    """x * c or x / c with c a Python number (the Scalar overload or a wrapped number)."""
    args = op.get("argv") or []
    return op_name(op) in SCALES and len(args) == 2 and _number(args[1]) is not None


class Match:
    """The ops of one attention chain, named by role (op indices into the builder's ops)."""

    def __init__(self, builder) -> None:
        self.b, self.ops = builder, builder.ops
        self.chain_ops: set[int] = set()
        self.scale = 1.0

    def producer(self, ref: dict) -> tuple[int | None, list[tuple[int, int]]]:
        (label, _), views = self.b.chain(ref)
        return (int(label[3:]) if label.startswith("op:") else None), views

    def peel(
        self, ref: dict, members: set[int], scales: bool = True
    ) -> tuple[dict, list[tuple[int, int]]]:
        """The tensor under copies and (with `scales`) scalar multiplies and divides (their
        factor kept in self.scale), and the views between it and `ref`, innermost first."""
        views: list[tuple[int, int]] = []
        while True:
            index, between = self.producer(ref)
            op = self.ops[index] if index is not None and index in members else None
            if op is None or not (_is_copy(op) or (scales and _is_scale(op))):
                (label, slot), _ = self.b.chain(ref)
                return {"t": label, "o": slot}, between + views
            if _is_scale(op):
                self.scale = SCALES[op_name(op)](self.scale, _number(op["argv"][1]))
            self.chain_ops.add(index)
            views = between + views
            ref = op["argv"][0]


def readable_views(builder, ref: dict, views: list, want: list[int]) -> list | None:
    """The views through which the kernel reads `ref` as the bmm operand of shape `want`
    ([batch, rows, cols]). A copy peeled away (matmul's `clone` of a transposed q) made a
    row-major tensor that a flattening view then reshaped: on the source itself that view may
    not exist, so trailing reshapes are dropped and the kernel reads the batch dims with their
    own strides. None when neither works, or the source is not built yet."""
    from kernelgraph.tools.builtin.values import replay

    value = builder.values.get(builder.chain(ref)[0])
    if value is None or value.meta is None:
        return None
    for end in range(len(views), -1, -1):
        if end < len(views) and not _reshape(builder.ops, views[end][0]):
            return None  # only reshapes may be dropped
        meta = value.meta
        try:
            for index, slot in views[:end]:
                meta = replay(builder.ops[index], lambda _, m=meta: m)[slot]
        except RuntimeError:
            continue
        shape = list(meta.shape)
        if math.prod(shape[:-2]) == want[0] and shape[-2:] == list(want[1:]):
            return views[:end]
    return None


def _reshape(ops: list[dict], index: int) -> bool:
    """A view that keeps row-major order (or an expand that changes nothing)."""
    op = ops[index]
    if op_name(op) == "expand":
        return list(op["argv"][1]) == list(op["outs"][0]["shape"])
    return op_name(op) in RESHAPES


def plan(builder, members: list[int]) -> tuple[Match, dict[str, Any]] | None:
    """The chain's roles among `members`, or None when they are not exactly one attention."""
    ops, inside = builder.ops, set(members)
    bmms = [i for i in members if op_name(ops[i]) == "bmm"]
    softmaxes = [i for i in members if op_name(ops[i]) in SOFTMAXES]
    if len(bmms) != 2 or len(softmaxes) != 1:
        return None
    scores_mm, values_mm, softmax = bmms[0], bmms[1], softmaxes[0]
    match = Match(builder)
    if match.producer(ops[values_mm]["argv"][0])[0] != softmax:
        return None
    dim, rank = int(ops[softmax]["argv"][1]), len(ops[softmax]["outs"][0]["shape"])
    if dim % rank != rank - 1:
        return None
    roles = _logits(match, ops[softmax]["argv"][0], scores_mm, inside)
    if roles is None:
        return None
    roles["safe"] = op_name(ops[softmax]) == "_safe_softmax"
    match.chain_ops |= {scores_mm, values_mm, softmax}
    roles["q"] = match.peel(ops[scores_mm]["argv"][0], inside)
    roles["kt"] = match.peel(ops[scores_mm]["argv"][1], inside)
    roles["v"] = match.peel(ops[values_mm]["argv"][1], inside, scales=False)
    operands = {"q": (scores_mm, 0), "kt": (scores_mm, 1), "v": (values_mm, 1)}
    for role, (mm, slot) in operands.items():
        ref, views = roles[role]
        if match.producer(ref)[0] in inside:  # not a tensor of the forward (a tensor multiply)
            return None
        views = readable_views(builder, ref, views, ops[mm]["arg_shapes"][slot])
        if views is None:
            return None
        roles[role] = (ref, views)
    if roles["mask"] is not None and match.producer(roles["mask"])[0] in match.chain_ops:
        return None  # the "mask" is the scores themselves (s + s)
    roles["out"] = _output_cast(builder, values_mm, inside)
    match.chain_ops.add(roles["out"])
    if not _read_inside(builder, match.chain_ops, roles["out"]):
        return None
    if any(_reads_any(builder, ops[i], match.chain_ops) for i in inside - match.chain_ops):
        return None
    return match, roles


def _logits(match: Match, ref: dict, scores_mm: int, inside: set[int]) -> dict | None:
    """Walk back from the softmax's input to the scores GEMM through scalar scales, copies and
    at most one mask (`+ mask`, or `masked_fill(mask, value)`). A scale after an additive mask
    would scale the mask too: not matched."""
    ops = match.ops
    roles: dict[str, Any] = {"mask": None, "mask_kind": "", "fill": 0.0, "causal_ops": set(),
                             "mask_shape": None}  # fmt: skip
    after_mask = 1.0  # scales applied after the mask
    while True:
        index, _ = match.producer(ref)
        if index == scores_mm:
            break
        if index is None or index not in inside:
            return None
        op, name = ops[index], op_name(ops[index])
        if _is_copy(op):
            ref = op["argv"][0]
        elif _is_scale(op):
            factor = SCALES[name](1.0, _number(op["argv"][1]))
            match.scale *= factor
            after_mask *= factor if roles["mask"] is None else 1.0
            ref = op["argv"][0]
        elif roles["mask"] is None and name == "masked_fill" and _number(op["argv"][2]) is not None:
            roles.update(mask=op["argv"][1], mask_kind="fill", fill=_number(op["argv"][2]),
                         mask_shape=op["outs"][0]["shape"])  # fmt: skip
            ref = op["argv"][0]
        elif (
            roles["mask"] is None
            and name == "add"
            and op["overload"] == "Tensor"
            and not op.get("kwargv")  # no alpha
        ):
            sides = [match.producer(a)[0] if isinstance(a, dict) else None for a in op["argv"][:2]]
            scores = 0 if _leads_to(match, sides[0], scores_mm, inside) else 1
            roles.update(mask=op["argv"][1 - scores], mask_kind="add",
                         mask_shape=op["outs"][0]["shape"])  # fmt: skip
            roles["causal_ops"] = _causal_ops(match, roles["mask"], inside)
            ref = op["argv"][scores]
        else:
            return None
        match.chain_ops.add(index)
    if roles["mask_kind"] == "add" and after_mask != 1.0:
        return None
    if roles["mask_kind"] == "fill":
        if after_mask <= 0:
            return None
        roles["fill"] *= after_mask  # the filled value as a logit of the softmax
    return roles


def _leads_to(match: Match, index: int | None, scores_mm: int, inside: set[int]) -> bool:
    """Whether op `index` is the scores GEMM or reaches it through scales and copies."""
    while index is not None and index in inside and index != scores_mm:
        op = match.ops[index]
        if not (_is_copy(op) or _is_scale(op)):
            return False
        index, _ = match.producer(op["argv"][0])
    return index == scores_mm


def _read_inside(builder, chain_ops: set[int], out: int) -> bool:
    """Every intermediate is read inside the chain only (dead readers aside)."""
    for index in chain_ops - {out}:
        key = (f"op:{index}", 0)
        dead = {i for i in builder.readers.get(key, set()) if builder._dead(i)}
        if builder.needed_outside(key, chain_ops | dead):
            return False
    return True


def _output_cast(builder, values_mm: int, inside: set[int]) -> int:
    """The op whose result is the attention's output: the values GEMM, or the one cast of it
    back to the inputs' dtype that math attention makes."""
    readers = builder.readers.get((f"op:{values_mm}", 0), set())
    if len(readers) == 1:
        (reader,) = readers
        if reader in inside and op_name(builder.ops[reader]) == "_to_copy":
            return reader
    return values_mm


def _reads_any(builder, op: dict, indices: set[int]) -> bool:
    labels = {f"op:{i}" for i in indices}
    return any(builder.chain(ref)[0][0] in labels for ref in tensor_refs(op))


def _causal_ops(match: Match, mask: dict, inside: set[int]) -> set[int]:
    """The ops of `where(tril(ones(L, S)), 0, -inf)` (torch's is_causal mask), or none."""
    ops = match.ops
    where, _ = match.producer(mask)
    if where is None or where not in inside or op_name(ops[where]) != "where":
        return set()
    tril, zero, minus_inf = (match.producer(a)[0] for a in ops[where]["argv"][:3])
    if tril is None or op_name(ops[tril]) != "tril" or len(ops[tril]["argv"]) > 1:
        return set()
    ones, _ = match.producer(ops[tril]["argv"][0])
    if ones is None or op_name(ops[ones]) != "ones":
        return set()
    if _scalar(ops, zero) != 0.0 or _scalar(ops, minus_inf) != -math.inf:
        return set()
    if len(ops[where]["outs"][0]["shape"]) != 2:
        return set()
    return {where, tril}


def _scalar(ops: list[dict], index: int | None) -> float | None:
    if index is None or op_name(ops[index]) != "scalar_tensor":
        return None
    value = ops[index]["argv"][0]
    return float(value["f"]) if isinstance(value, dict) else float(value)


def unbuilt_producers(builder, ref: dict | None) -> list[int] | None:
    """The ops (in order) still to build before `ref` exists: a mask that a hand-written
    attention computes in a later stage than the chain starts. None when one of them is not
    an op the builtin writes."""

    if ref is None:
        return []
    key, _ = builder.chain(ref)
    if not key[0].startswith("op:") or key in builder.values:
        return []
    index = int(key[0][3:])
    op = builder.ops[index]
    if op.get("kind") == ALLOC:
        return []  # made where it is read (a factory step)
    if not writable(op, builder.policy):
        return None
    found: list[int] = []
    for inner in tensor_refs(op):
        more = unbuilt_producers(builder, inner)
        if more is None:
            return None
        found += [i for i in more if i not in found]
    return [*found, index]


def manual_chains(builder) -> list[set[int]]:
    """Attention written out by hand, outside an SDPA stage: for each softmax over the last
    dim read only by a bmm, the ops from the scores GEMM (and the copies of q, k, v) to that
    bmm, when every one of them is read inside the chain only."""
    ops, found = builder.ops, []
    composite = {i for s in builder.analysis.get("stages") or []
                 if s.get("composite") == "scaled_dot_product_attention" for i in s["ops"]}  # fmt: skip
    for softmax, op in enumerate(ops):
        if op_name(op) not in SOFTMAXES or op.get("kind") in NO_COMPUTE or softmax in composite:
            continue
        readers = builder.readers.get((f"op:{softmax}", 0), set())
        if len(readers) != 1 or op_name(ops[next(iter(readers))]) != "bmm":
            continue
        chain = _chain_ops(builder, softmax, next(iter(readers)))
        if chain and _read_inside(builder, chain, max(chain)):
            found.append(chain)
    return found


def _chain_ops(builder, softmax: int, values_mm: int) -> set[int] | None:
    match, ops = Match(builder), builder.ops
    everything = set(range(len(ops)))
    ref, chain = ops[softmax]["argv"][0], {softmax, values_mm}
    while True:
        index, _ = match.producer(ref)
        if index is None:
            return None
        op, name = ops[index], op_name(ops[index])
        chain.add(index)
        if name == "bmm":
            scores_mm = index
            break
        if _is_copy(op) or _is_scale(op) or name == "masked_fill":
            ref = op["argv"][0]
        elif name == "add" and op["overload"] == "Tensor":
            sides = [match.producer(a)[0] if isinstance(a, dict) else None for a in op["argv"][:2]]
            ref = op["argv"][0 if _leads_to_bmm(match, sides[0]) else 1]
        else:
            return None
    match.peel(ops[scores_mm]["argv"][0], everything)
    match.peel(ops[scores_mm]["argv"][1], everything)
    match.peel(ops[values_mm]["argv"][1], everything, scales=False)
    return chain | match.chain_ops


def _leads_to_bmm(match: Match, index: int | None) -> bool:
    while index is not None:
        op = match.ops[index]
        if op_name(op) == "bmm":
            return True
        if not (_is_copy(op) or _is_scale(op)):
            return False
        index, _ = match.producer(op["argv"][0])
    return False
