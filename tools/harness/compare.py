"""Comparing candidate outputs with reference outputs (in the judge). Torch only.

Floating outputs: |c - r| <= atol + rtol * |r| elementwise, computed in float64; NaN and ±Inf
must sit at the same positions. Integer and bool outputs must match exactly, except that an
argmax/argmin output may pick any index holding an equal value (ties).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Mismatch:
    message: str
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatches: int | None = None
    shape: list[int] | None = None


@dataclass
class ArgReduction:
    """Where an integer output came from, so that ties can be accepted."""

    source: torch.Tensor
    dim: int | None
    keepdim: bool


def compare(
    candidate: torch.Tensor,
    reference: torch.Tensor,
    atol: float,
    rtol: float,
    arg_source: ArgReduction | None = None,
) -> Mismatch | None:
    shape = list(reference.shape)
    if candidate.shape != reference.shape:
        return Mismatch(
            f"shape {list(candidate.shape)} differs from the reference's {shape}", shape=shape
        )
    if candidate.dtype != reference.dtype:
        return Mismatch(
            f"dtype {candidate.dtype} differs from the reference's {reference.dtype}", shape=shape
        )
    if not reference.is_floating_point() and not reference.is_complex():
        return _compare_exact(candidate, reference, arg_source, shape)
    return _compare_close(candidate, reference, atol, rtol, shape)


def _compare_close(c, r, atol, rtol, shape) -> Mismatch | None:
    c64, r64 = c.double(), r.double()
    for name, test in (("NaN", torch.isnan), ("+Inf", torch.isposinf), ("-Inf", torch.isneginf)):
        bad = test(c64) != test(r64)
        if bad.any():
            count = int(bad.sum())
            hint = ""
            if name == "NaN" and bool((test(c64) & ~test(r64)).any()):
                hint = (
                    " (NaN where the reference is finite: often output memory the kernel "
                    "never wrote, which the harness fills with NaN)"
                )
            return Mismatch(
                f"{name} positions differ from the reference at {count} elements{hint}",
                mismatches=count,
                shape=shape,
            )
    finite = torch.isfinite(r64)
    diff = torch.where(finite, (c64 - r64).abs(), torch.zeros_like(r64))
    bound = atol + rtol * r64.abs()
    bad = finite & (diff > bound)
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = diff / r64.abs().clamp_min(1e-12)
    max_rel = float(torch.where(finite, rel, torch.zeros_like(rel)).max()) if rel.numel() else 0.0
    if not bad.any():
        return None
    count = int(bad.sum())
    first = tuple(int(i) for i in bad.nonzero()[0])
    return Mismatch(
        f"{count} of {r.numel()} elements differ beyond atol={atol:g}, rtol={rtol:g} "
        f"(max abs err {max_abs:.3e}, max rel err {max_rel:.3e}; first at index {list(first)}: "
        f"got {float(c64[first]):.6g}, expected {float(r64[first]):.6g})",
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        mismatches=count,
        shape=shape,
    )


def _compare_exact(c, r, arg_source, shape) -> Mismatch | None:
    bad = c != r
    if not bad.any():
        return None
    if arg_source is not None and _ties_only(c, r, arg_source):
        return None
    count = int(bad.sum())
    return Mismatch(
        f"{count} of {r.numel()} integer elements differ (exact match required)",
        mismatches=count,
        shape=shape,
    )


def _ties_only(c: torch.Tensor, r: torch.Tensor, arg: ArgReduction) -> bool:
    """True when every differing index points at a value equal to the reference's pick."""
    source = arg.source
    if arg.dim is None:
        flat = source.reshape(-1)
        if not (0 <= int(c.reshape(-1)[0]) < flat.numel()):
            return False
        return bool(flat[c.reshape(-1).long()].eq(flat[r.reshape(-1).long()]).all())
    dim = arg.dim % source.dim()
    c_idx, r_idx = c.long(), r.long()
    if not arg.keepdim:
        c_idx, r_idx = c_idx.unsqueeze(dim), r_idx.unsqueeze(dim)
    if bool((c_idx < 0).any()) or bool((c_idx >= source.shape[dim]).any()):
        return False
    picked = source.gather(dim, c_idx)
    expected = source.gather(dim, r_idx)
    same = picked.eq(expected) | (picked.isnan() & expected.isnan())
    return bool(same.all())


def is_constant(t: torch.Tensor) -> bool:
    if t.numel() <= 1:
        return False
    flat = t.reshape(-1)
    first = flat[0]
    if t.is_floating_point() and bool(first.isnan()):
        return bool(flat.isnan().all())
    return bool(flat.eq(first).all())


def within_tolerance_only(reference: torch.Tensor, atol: float) -> bool:
    """Whether every reference value is so small that atol alone lets almost anything pass."""
    if not reference.is_floating_point() or reference.numel() < 2:
        return False
    finite = reference[torch.isfinite(reference)]
    return finite.numel() > 1 and float(finite.abs().max()) <= 10 * atol


def tracks_reference(candidate: torch.Tensor, reference: torch.Tensor) -> bool:
    """Whether the candidate varies with the reference: correlation >= 0.9, similar spread."""
    keep = torch.isfinite(reference) & torch.isfinite(candidate)
    c, r = candidate[keep].double(), reference[keep].double()
    if r.numel() < 2 or float(r.std()) == 0.0:
        return True
    c_std, r_std = float(c.std()), float(r.std())
    if c_std == 0.0:
        return False
    corr = float(((c - c.mean()) * (r - r.mean())).mean()) / (c_std * r_std)
    return corr >= 0.9 and 0.5 <= c_std / r_std <= 2.0
