"""Comparing candidate outputs with reference outputs (in the judge). Torch only.

Floating outputs: |c - r| <= atol + rtol * |r| elementwise, computed in float64; NaN and ±Inf
must sit at the same positions. Integer and bool outputs must match exactly, except that an
argmax/argmin output may pick any index holding an equal value (ties).
"""

from __future__ import annotations

import functools
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


CHUNK = 1 << 24  # elements per step: float64 temporaries stay near 128 MB whatever the size


def flat_chunks(*tensors: torch.Tensor, size: int | None = None):
    """Aligned flat slices of same-shaped tensors, so whole-tensor temporaries never exist."""
    size = size or CHUNK
    flats = [t.reshape(-1) for t in tensors]
    total = flats[0].numel()
    for start in range(0, total, size):
        yield start, [f[start : start + size] for f in flats]


POSITION_TESTS = (("NaN", torch.isnan), ("+Inf", torch.isposinf), ("-Inf", torch.isneginf))


def _compare_close(c, r, atol, rtol, shape) -> Mismatch | None:
    """One pass over the chunks; the sums stay on the device until the end (one sync)."""
    zeros = functools.partial(torch.zeros, device=r.device)
    moved = zeros(len(POSITION_TESTS), dtype=torch.int64)  # per test: positions that differ
    nan_where_finite = zeros((), dtype=torch.bool)
    bad = zeros((), dtype=torch.int64)
    max_abs, max_rel = zeros((), dtype=torch.float64), zeros((), dtype=torch.float64)
    for _, (cc, rr) in flat_chunks(c, r):
        for k, (name, test) in enumerate(POSITION_TESTS):
            tc, tr = test(cc), test(rr)
            moved[k] += (tc != tr).sum()
            if name == "NaN":
                nan_where_finite |= (tc & ~tr).any()
        c64, r64 = cc.double(), rr.double()
        finite = torch.isfinite(r64)
        diff = torch.where(finite, (c64 - r64).abs(), 0.0)
        bad += (finite & (diff > atol + rtol * r64.abs())).sum()
        if diff.numel():
            max_abs = torch.maximum(max_abs, diff.max())
            max_rel = torch.maximum(max_rel, (diff / r64.abs().clamp_min(1e-12)).max())
    for (name, _), count in zip(POSITION_TESTS, moved.tolist(), strict=True):
        if count:
            hint = (
                " (NaN where the reference is finite: often output memory the kernel "
                "never wrote, which the harness fills with NaN)"
                if name == "NaN" and bool(nan_where_finite)
                else ""
            )
            return Mismatch(
                f"{name} positions differ from the reference at {count} elements{hint}",
                mismatches=count,
                shape=shape,
            )
    count = int(bad)
    if not count:
        return None
    first = _first_beyond(c, r, atol, rtol)
    got, want = float(c.reshape(-1)[first]), float(r.reshape(-1)[first])
    abs_err, rel_err = float(max_abs), float(max_rel)
    return Mismatch(
        f"{count} of {r.numel()} elements differ beyond atol={atol:g}, rtol={rtol:g} "
        f"(max abs err {abs_err:.3e}, max rel err {rel_err:.3e}; first at index "
        f"{_unravel(first, shape)}: got {got:.6g}, expected {want:.6g})",
        max_abs_err=abs_err,
        max_rel_err=rel_err,
        mismatches=count,
        shape=shape,
    )


def _first_beyond(c, r, atol: float, rtol: float) -> int:
    """The flat index of the first element outside the tolerance (a failing run only)."""
    for start, (cc, rr) in flat_chunks(c, r):
        c64, r64 = cc.double(), rr.double()
        beyond = torch.isfinite(r64) & ((c64 - r64).abs() > atol + rtol * r64.abs())
        if bool(beyond.any()):
            return start + int(beyond.nonzero()[0, 0])
    raise AssertionError("no element outside the tolerance")


def _unravel(flat_index: int, shape: list[int]) -> list[int]:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size)
        flat_index //= size
    return index[::-1]


def _compare_exact(c, r, arg_source, shape) -> Mismatch | None:
    count = sum(int((cc != rr).sum()) for _, (cc, rr) in flat_chunks(c, r))
    if not count:
        return None
    if arg_source is not None and _ties_only(c, r, arg_source):
        return None
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


def fingerprint(t: torch.Tensor) -> tuple[int, int]:
    """A content hash computed where the tensor lives: equal bytes give equal prints, and a
    changed tensor almost surely a different one. No copy of the tensor is kept; the sums stay
    on the device until the end (integer sums wrap the same way every time)."""
    words = _words(t.detach().contiguous().reshape(-1))
    total = torch.zeros((), dtype=torch.int64, device=t.device)
    weighted = total.clone()
    weights = _position_weights(t.device)
    for _, (chunk,) in flat_chunks(words, size=PRINT_CHUNK):
        wide = chunk.to(torch.int64)
        total += wide.sum()
        weighted += (wide * weights[: wide.numel()]).sum()
    return int(total), int(weighted)


PRINT_MODULUS = 65521
PRINT_CHUNK = PRINT_MODULUS * 256  # a multiple of the modulus: every chunk has the same weights


@functools.cache
def _position_weights(device: torch.device) -> torch.Tensor:
    return torch.arange(PRINT_CHUNK, device=device) % PRINT_MODULUS + 1


def _words(flat: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as 32-bit words where they divide evenly (4x fewer elements)."""
    raw = flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
    if raw.numel() % 4 == 0 and raw.storage_offset() % 4 == 0:
        return raw.view(torch.int32)
    return raw


def is_constant(t: torch.Tensor) -> bool:
    if t.numel() <= 1:
        return False
    first = t.reshape(-1)[0]
    if t.is_floating_point() and bool(first.isnan()):
        return all(bool(chunk.isnan().all()) for _, (chunk,) in flat_chunks(t))
    return all(bool(chunk.eq(first).all()) for _, (chunk,) in flat_chunks(t))


def within_tolerance_only(reference: torch.Tensor, atol: float) -> bool:
    """Whether every reference value is so small that atol alone lets almost anything pass."""
    if not reference.is_floating_point() or reference.numel() < 2:
        return False
    finite = torch.zeros((), dtype=torch.int64, device=reference.device)
    largest = torch.zeros((), dtype=torch.float64, device=reference.device)
    for _, (chunk,) in flat_chunks(reference):
        kept = torch.isfinite(chunk)
        finite += kept.sum()
        largest = torch.maximum(largest, torch.where(kept, chunk.abs(), 0).max().double())
    return int(finite) > 1 and float(largest) <= 10 * atol


def tracks_reference(candidate: torch.Tensor, reference: torch.Tensor) -> bool:
    """Whether the candidate varies with the reference: correlation >= 0.9, similar spread."""
    n = sc = sr = scc = srr = scr = 0.0
    for _, (cc, rr) in flat_chunks(candidate, reference):
        keep = torch.isfinite(rr) & torch.isfinite(cc)
        c, r = cc[keep].double(), rr[keep].double()
        n += c.numel()
        sc, sr = sc + float(c.sum()), sr + float(r.sum())
        scc, srr, scr = (
            scc + float((c * c).sum()),
            srr + float((r * r).sum()),
            scr + float((c * r).sum()),
        )
    if n < 2:
        return True
    r_var = max(srr / n - (sr / n) ** 2, 0.0)
    c_var = max(scc / n - (sc / n) ** 2, 0.0)
    if r_var == 0.0:
        return True
    if c_var == 0.0:
        return False
    corr = (scr / n - (sc / n) * (sr / n)) / (c_var * r_var) ** 0.5
    ratio = (c_var / r_var) ** 0.5
    return corr >= 0.9 and 0.5 <= ratio <= 2.0
