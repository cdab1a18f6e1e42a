"""Dropout in training mode, written as its expectation: the identity.

No kernel can draw the reference's mask: KernelBench's evaluator, like kernelgraph's harness,
runs the candidate after the reference without reseeding, so the two consume different random
numbers. The only training-mode dropout a kernel can match is one whose mask cannot reach the
output (level2/83 clamps to zero before it). The builtin therefore writes `x * mask / q` as
`x * 1.0` (the mask's expectation is q, and q / q is exactly 1), and the verifier decides: where
the mask does matter the harness already rejects the reference as nondeterministic.

`dropout_as_identity(ops)` rewrites the traced ops in place and returns the notes for the kernel
file. Two traced forms: `mul(x, div(bernoulli(empty_like(x), q), q))` (dropout on meta and CPU
tensors) and `native_dropout(x, p, True)` (on CUDA tensors). Any other random op stays, and the
builtin refuses it by name.
"""

from __future__ import annotations

from typing import Any

NOTE = (
    "dropout in training mode is written as its expectation (x * 1.0): no kernel can draw the "
    "reference's random mask, so this matches only where the mask cannot reach the output"
)


def dropout_as_identity(ops: list[dict[str, Any]]) -> list[str]:
    rewritten = False
    for i, op in enumerate(ops):
        if op["op"] == "aten.native_dropout" and len(op["argv"]) > 2 and op["argv"][2]:
            ops[i] = _times_one(op, op["argv"][0])
            rewritten = True
        elif op["op"] == "aten.mul" and op["overload"] == "Tensor":
            kept = _unmasked_operand(ops, op)
            if kept is not None:
                ops[i] = _times_one(op, kept)
                rewritten = True
    return [NOTE] if rewritten else []


def _times_one(op: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """`ref * 1.0`: the same values (NaN, infinities and signed zeros included), fusable like
    any pointwise op. A native_dropout's mask output is dropped: if anything reads it, the
    builtin refuses that read as a missing value."""
    return {**op, "op": "aten.mul", "overload": "Scalar", "kind": "pointwise",
            "argv": [ref, 1.0], "kwargv": {}, "reads": [ref["t"]], "outs": op["outs"][:1]}  # fmt: skip


def _unmasked_operand(ops: list[dict[str, Any]], op: dict[str, Any]) -> dict | None:
    """The operand of `x * mask` that is not a dropout mask, when the other one is and `x`
    already has the product's shape (a broadcast mask: feature dropout)."""
    for mask_at, other_at in ((1, 0), (0, 1)):
        other = op["argv"][other_at]
        if (
            _is_mask(ops, op["argv"][mask_at])
            and isinstance(other, dict)
            and "t" in other
            and op["arg_shapes"][other_at] == op["outs"][0]["shape"]
        ):
            return other
    return None


def _is_mask(ops: list[dict[str, Any]], ref: Any) -> bool:
    """`div(bernoulli(empty, q), q)`: a mask of 0 and 1/q, of expectation 1. The trace leaves
    out a default argument: `bernoulli_(q=0.5)` comes with no q."""
    scaled = _producer(ops, ref)
    if not scaled or scaled["op"] != "aten.div" or scaled["overload"] != "Scalar":
        return False
    drawn = _producer(ops, scaled["argv"][0])
    if not drawn or drawn["op"] != "aten.bernoulli" or drawn["overload"] not in ("float", "p"):
        return False
    keep = drawn["argv"][1] if len(drawn["argv"]) > 1 else drawn["kwargv"].get("p", 0.5)
    allocated = _producer(ops, drawn["argv"][0])
    return (
        isinstance(keep, float)
        and 0 < keep
        and scaled["argv"][1] == keep
        and allocated is not None
        and allocated.get("kind") == "alloc"
    )


def _producer(ops: list[dict[str, Any]], ref: Any) -> dict[str, Any] | None:
    if not isinstance(ref, dict) or not str(ref.get("t", "")).startswith("op:"):
        return None
    return ops[int(ref["t"][3:])]
