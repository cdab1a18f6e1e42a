"""Attention (`F.scaled_dot_product_attention`) as one `AttentionKernel`, flash style.

The trace of SDPA is PyTorch's math decomposition: q and k^T scaled, a batched GEMM, an
optional additive mask, a softmax over the keys and a second batched GEMM with v. Where the
analysis marks such a stage (its `composite`) and the ops have exactly that shape, the whole
chain becomes one kernel: scores are never stored, the softmax runs online (a running max and
sum per query row, the output rescaled as the max grows). A causal mask that forward builds as
`where(tril(ones(L, S)), 0, -inf)` becomes index arithmetic, and key blocks past the diagonal
are skipped; any other mask is computed by its own kernels and read as a tile.

Head dims above FLASH_MAX_D do not fit one program's registers: those take two passes (scores
and each row's log-sum-exp, then the normalised weights times v). Anything else in the stage
(dropout, a mask applied another way) leaves the stage to the op-by-op path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kernelgraph.tools.builtin.group_types import GroupResult, op_name
from kernelgraph.tools.builtin.values import Value

FLASH_MAX_D = 256  # head dims (padded to a power of two) one flash program holds
SOFTMAXES = frozenset({"_safe_softmax", "_softmax", "softmax"})
SCALES = {"mul": lambda s, x: s * x, "div": lambda s, x: s / x}
CAST_KWARGS = {"dtype", "layout", "device", "pin_memory"}


@dataclass
class Operand3:
    arg: str
    strides: tuple[int, int, int]  # (batch, row, col) in elements


@dataclass
class AttentionKernel:
    name: str
    batch: int  # batch x heads, flattened
    queries: int
    keys: int
    d: int  # q/k head dim
    dv: int  # v head dim
    scale: float
    causal: bool
    q: Operand3  # [batch, l, d]
    kt: Operand3  # [batch, d, s]: k transposed, as the trace multiplies it
    v: Operand3  # [batch, s, dv]
    inputs: list[str]
    outputs: list[str]
    mask: str = ""  # an additive [.., l, s] mask argument ("" for none)
    mask_batch: list[tuple[int, int]] = field(default_factory=list)  # (size, stride), outer first
    mask_strides: tuple[int, int] = (0, 0)  # (row, col)
    kind: str = "attention"

    @property
    def two_pass(self) -> bool:
        return max(self.d, self.dv) > FLASH_MAX_D

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.queries * self.keys * (self.d + self.dv)

    def describe(self) -> str:
        how = "two passes (scores, then weights x v)" if self.two_pass else "flash, one pass"
        mask = ", causal" if self.causal else ", masked" if self.mask else ""
        return (f"{self.name}: attention over {self.batch} x [{self.queries} queries x {self.keys} keys], "
                f"head dims {self.d}/{self.dv}, online softmax{mask}; {how}")  # fmt: skip

    def axes(self) -> str:
        return f"{self.name}: query blocks, batch x heads"

    def grid(self) -> str:
        return "(cdiv(L, BLOCK_M) x batch x heads,)"

    def pseudo(self) -> str:
        return (
            f"{self.name}: per query block: for key blocks: s = scale q k^T (+mask); "
            "m, l online; acc = acc * exp(m_old - m) + exp(s - m) v; out = acc / l"
        )


class _Match:
    """The ops of one SDPA stage, named by role (op indices into the builder's ops)."""

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
        """The tensor under dtype casts and (with `scales`) scalar multiplies and divides
        (their factor kept in self.scale), and the views between it and `ref`, innermost
        first. Under a run's precision every float tensor has one dtype: the casts that math
        attention makes (fp16 inputs to fp32 and back) change nothing."""
        views: list[tuple[int, int]] = []
        while True:
            index, between = self.producer(ref)
            op = self.ops[index] if index is not None and index in members else None
            if op is not None and _is_cast(op):
                pass
            elif op is not None and scales and _is_scale(op):
                self.scale = SCALES[op_name(op)](self.scale, float(op["argv"][1]))
            else:
                (label, slot), _ = self.b.chain(ref)
                return {"t": label, "o": slot}, between + views
            self.chain_ops.add(index)
            views = between + views
            ref = op["argv"][0]


def _is_cast(op: dict) -> bool:
    return op_name(op) == "_to_copy" and set(op.get("kwargv") or {}) <= CAST_KWARGS


def _is_scale(op: dict) -> bool:
    return op_name(op) in SCALES and op["overload"] == "Scalar"


def fuse_attention(builder, members: list[int]) -> bool:
    """Launch one AttentionKernel for an SDPA stage's ops; False (nothing done) when they are
    not exactly the attention chain or the backend has no attention kernel."""
    if AttentionKernel not in builder.kinds:
        return False
    plan = _plan(builder, members)
    if plan is None:
        return False
    match, roles = plan
    others = [i for i in members if i not in match.chain_ops and i not in roles["causal_ops"]]
    if others:
        builder._group(others, "pointwise")  # the mask, computed first
    kernel, inputs, out = _kernel(builder, match, roles)
    builder._launch(GroupResult(kernel, inputs, [out]), members, "attention")
    return True


def _plan(builder, members: list[int]) -> tuple[_Match, dict[str, Any]] | None:
    ops, inside = builder.ops, set(members)
    bmms = [i for i in members if op_name(ops[i]) == "bmm"]
    softmaxes = [i for i in members if op_name(ops[i]) in SOFTMAXES]
    if len(bmms) != 2 or len(softmaxes) != 1:
        return None
    scores_mm, values_mm, softmax = bmms[0], bmms[1], softmaxes[0]
    match = _Match(builder)
    if match.producer(ops[values_mm]["argv"][0])[0] != softmax:
        return None
    dim, rank = int(ops[softmax]["argv"][1]), len(ops[softmax]["outs"][0]["shape"])
    if dim % rank != rank - 1:
        return None
    roles: dict[str, Any] = {"mask": None, "causal_ops": set(), "mask_shape": None}
    logits, _ = match.producer(ops[softmax]["argv"][0])
    if logits is not None and op_name(ops[logits]) == "add" and logits in inside:
        sides = [match.producer(a)[0] if isinstance(a, dict) else None
                 for a in ops[logits]["argv"][:2]]  # fmt: skip
        if scores_mm not in sides or ops[logits]["overload"] != "Tensor":
            return None
        roles["mask"] = ops[logits]["argv"][1 - sides.index(scores_mm)]
        roles["mask_shape"] = ops[logits]["outs"][0]["shape"]
        roles["causal_ops"] = _causal_ops(match, roles["mask"], inside)
        match.chain_ops.add(logits)
    elif logits != scores_mm:
        return None
    match.chain_ops |= {scores_mm, values_mm, softmax}
    roles["q"] = match.peel(ops[scores_mm]["argv"][0], inside)
    roles["kt"] = match.peel(ops[scores_mm]["argv"][1], inside)
    roles["v"] = match.peel(ops[values_mm]["argv"][1], inside, scales=False)
    for ref, _ in (roles["q"], roles["kt"], roles["v"]):
        if match.producer(ref)[0] in inside:  # not a tensor of the forward (a tensor multiply)
            return None
    roles["out"] = _output_cast(builder, values_mm, inside)
    match.chain_ops.add(roles["out"])
    # every intermediate is read inside the chain only
    for index in match.chain_ops - {roles["out"]}:
        key = (f"op:{index}", 0)
        dead = {i for i in builder.readers.get(key, set()) if builder._dead(i)}
        if builder.needed_outside(key, match.chain_ops | dead):
            return None
    if any(_reads_any(builder, ops[i], match.chain_ops) for i in inside - match.chain_ops):
        return None
    return match, roles


def _output_cast(builder, values_mm: int, inside: set[int]) -> int:
    """The op whose result is the attention's output: the values GEMM, or the one cast of it
    back to the inputs' dtype that math attention makes."""
    readers = builder.readers.get((f"op:{values_mm}", 0), set())
    if len(readers) == 1:
        (reader,) = readers
        if reader in inside and _is_cast(builder.ops[reader]):
            return reader
    return values_mm


def _reads_any(builder, op: dict, indices: set[int]) -> bool:
    from kernelgraph.tools.builtin.program import _tensor_refs

    labels = {f"op:{i}" for i in indices}
    return any(builder.chain(ref)[0][0] in labels for ref in _tensor_refs(op))


def _causal_ops(match: _Match, mask: dict, inside: set[int]) -> set[int]:
    """The ops of `where(tril(ones(L, S)), 0, -inf)` (torch's is_causal mask), or none."""
    ops = match.ops
    where, _ = match.producer(mask)
    if where is None or where not in inside or op_name(ops[where]) != "where":
        return set()
    cond, zero, minus_inf = (match.producer(a)[0] for a in ops[where]["argv"][:3])
    tril = cond
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


def _kernel(builder, match: _Match, roles: dict[str, Any]):
    ops, out_index = builder.ops, roles["out"]
    name = f"k{len(builder.kernel_steps())}_attention"
    q = builder.reviewed(builder.external(roles["q"][0]), roles["q"][1], f"{name}_q")
    kt = builder.reviewed(builder.external(roles["kt"][0]), roles["kt"][1], f"{name}_kt")
    v = builder.reviewed(builder.external(roles["v"][0]), roles["v"][1], f"{name}_v")
    batch, length, d = q.shape
    keys, dv = kt.shape[2], v.shape[2]
    inputs, args = [q, kt, v], ["q", "kt", "v"]
    mask_arg, mask_batch, mask_strides = "", [], (0, 0)
    causal = bool(roles["causal_ops"])
    if roles["mask"] is not None and not causal:
        mask = builder.external(roles["mask"])
        shape = roles["mask_shape"]
        strides = _broadcast(mask, shape)
        mask_arg, inputs, args = "mask", [*inputs, mask], [*args, "mask"]
        mask_batch = list(zip(shape[:-2], strides[:-2], strict=True))
        mask_strides = (strides[-2], strides[-1])
    out_shape, out_dtype = ops[out_index]["outs"][0]["shape"], builder.out_dtype(out_index, 0)
    kernel = AttentionKernel(
        name, batch, length, keys, d, dv, match.scale, causal,
        Operand3("q", tuple(q.strides)), Operand3("kt", tuple(kt.strides)),
        Operand3("v", tuple(v.strides)), args, ["out"], mask_arg, mask_batch, mask_strides,
    )  # fmt: skip
    return kernel, inputs, ((f"op:{out_index}", 0), out_shape, out_dtype)


def _broadcast(value: Value, shape: list[int]) -> list[int]:
    """`value`'s strides when broadcast to `shape` (0 along broadcast dims)."""
    pad = len(shape) - len(value.shape)
    sizes, strides = [1] * pad + list(value.shape), [0] * pad + list(value.strides)
    return [0 if size == 1 and want != 1 else stride
            for size, stride, want in zip(sizes, strides, shape, strict=True)]  # fmt: skip


__all__ = ["FLASH_MAX_D", "AttentionKernel", "fuse_attention"]
