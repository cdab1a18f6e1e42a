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
from dataclasses import dataclass
from typing import Any

from kernelgraph.tools.builtin.attention_match import Match, plan, unbuilt_producers
from kernelgraph.tools.builtin.group_types import GroupResult
from kernelgraph.tools.builtin.values import Value

FLASH_MAX_D = 256  # head dims (padded to a power of two) one flash program holds


@dataclass
class Operand3:
    """A [.., rows, cols] tensor the kernel reads: its batch dims flatten, row-major, to the
    kernel's batch x heads."""

    arg: str
    batch: list[tuple[int, int]]  # (size, stride in elements) per batch dim, outer first
    row: int
    col: int

    @classmethod
    def of(cls, arg: str, shape: list[int], strides: list[int]) -> Operand3:
        return cls(arg, list(zip(shape[:-2], strides[:-2], strict=True)), strides[-2], strides[-1])


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
    q: Operand3  # [.., l, d]
    kt: Operand3  # [.., d, s]: k transposed, as the trace multiplies it
    v: Operand3  # [.., s, dv]
    inputs: list[str]
    outputs: list[str]
    mask: Operand3 | None = None  # [.., l, s], broadcast
    mask_fill: float | None = None  # None: the mask is added; else where it is set, this logit
    safe: bool = True  # a row with no key gives 0 (_safe_softmax), not NaN (softmax)
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


def fuse_attention(builder, members: list[int]) -> set[int]:
    """Launch one AttentionKernel for an attention chain's ops (and first the kernels of its
    mask); the ops it covered, or none when they are not exactly one attention or the backend
    has no attention kernel."""
    if AttentionKernel not in builder.kinds:
        return set()
    found = plan(builder, members)
    if found is None:
        return set()
    match, roles = found
    mask = None if roles["causal_ops"] else roles["mask"]
    unbuilt = unbuilt_producers(builder, mask)
    if unbuilt is None:
        return set()
    covered = match.chain_ops | roles["causal_ops"]
    others = sorted({i for i in members if i not in covered} | set(unbuilt))
    if others:
        builder._group(others, "pointwise")  # the mask, computed first
    kernel, inputs, out = _kernel(builder, match, roles)
    builder._launch(GroupResult(kernel, inputs, [out]), sorted(covered), "attention")
    return covered | set(others)


def fuse_manual_attention(builder, stage: dict[str, Any], members: list[int]) -> list[int]:
    """Attention written out by hand spans stages: its ops wait (are left out of their
    stages) until the stage of its last GEMM, which launches one attention kernel for
    them. If the chain does not fit one, its ops are built then, stage by stage, as
    they would have been."""
    waiting = {i for chain in builder.attention_chains for i in chain}
    for chain in [c for c in builder.attention_chains if max(c) in members]:
        builder.attention_chains.remove(chain)
        before = [i for i in members if i < max(chain) and i not in waiting]
        if before:  # what the chain may read, in the same stage
            builder.add_stage({**stage, "ops": before})
            builder.fused |= set(before)
        covered = fuse_attention(builder, sorted(chain))
        if not covered:
            for original in builder.analysis.get("stages") or []:
                if chain & set(original["ops"]):
                    builder.add_stage({**original, "ops": sorted(chain & set(original["ops"]))})
            covered = set(chain)
        builder.fused |= covered
    return [i for i in members if i not in builder.fused and i not in waiting]


def _kernel(builder, match: Match, roles: dict[str, Any]):
    ops, out_index = builder.ops, roles["out"]
    name = f"k{len(builder.kernel_steps())}_attention"
    q, kt, v = (builder.reviewed(builder.external(roles[r][0]), roles[r][1], f"{name}_{r}")
                for r in ("q", "kt", "v"))  # fmt: skip
    batch, length, d = math.prod(q.shape[:-2]), q.shape[-2], q.shape[-1]
    keys, dv = kt.shape[-1], v.shape[-1]
    inputs, args = [q, kt, v], ["q", "kt", "v"]
    mask = None
    if roles["mask"] is not None and not roles["causal_ops"]:
        value, shape = builder.external(roles["mask"]), roles["mask_shape"]
        mask = Operand3.of("mask", shape, _broadcast(value, shape))
        inputs, args = [*inputs, value], [*args, "mask"]
    out_shape, out_dtype = ops[out_index]["outs"][0]["shape"], builder.out_dtype(out_index, 0)
    kernel = AttentionKernel(
        name, batch, length, keys, d, dv, match.scale, bool(roles["causal_ops"]),
        Operand3.of("q", q.shape, q.strides), Operand3.of("kt", kt.shape, kt.strides),
        Operand3.of("v", v.shape, v.strides), args, ["out"], mask,
        roles["fill"] if roles["mask_kind"] == "fill" else None, roles["safe"],
    )  # fmt: skip
    return kernel, inputs, ((f"op:{out_index}", 0), out_shape, out_dtype)


def _broadcast(value: Value, shape: list[int]) -> list[int]:
    """`value`'s strides when broadcast to `shape` (0 along broadcast dims)."""
    pad = len(shape) - len(value.shape)
    sizes, strides = [1] * pad + list(value.shape), [0] * pad + list(value.strides)
    return [0 if size == 1 and want != 1 else stride
            for size, stride, want in zip(sizes, strides, shape, strict=True)]  # fmt: skip


__all__ = ["FLASH_MAX_D", "AttentionKernel", "fuse_attention", "fuse_manual_attention"]
