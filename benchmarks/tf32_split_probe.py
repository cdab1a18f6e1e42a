"""Probe: fp32 GEMMs as three TF32 products, operands split in the K loop or ahead of it.

Triton's `input_precision="tf32x3"` splits each operand tile into a TF32 high part and a TF32
low part inside the K loop, every program, every step. Splitting once per forward instead
(a copy kernel writes hi and lo of A and B, K-major) leaves the K loop three plain TF32 dots
over exact TF32 values, at the price of twice the operand bytes. This times both at
KernelBench's GEMM shapes, over a few tile configurations each, side by side: median of
`triton.testing.do_bench` (L2 cleared), the whole forward (copies included) and the GEMM
alone, plus each variant's error against torch's fp32 matmul (TF32 off) and how many elements
miss KernelBench's fp32 tolerance (atol = rtol = 1e-4).

    python benchmarks/tf32_split_probe.py --out probe.jsonl [--shapes l1_7,lin_1024]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
import triton
import triton.language as tl

# name: (M, N, K, operand maker); "lin" shapes are nn.Linear (B = W.t(), W K-major already)
SHAPES = {
    "l1_2": (2048, 4096, 8192, "rand"),
    "l1_7": (32768, 32768, 64, "rand"),
    "l1_9": (32768, 32768, 32, "rand"),
    "l1_13": (4096, 4096, 4096, "rand"),
    "lin_1024": (1024, 8192, 8192, "linear"),
    "lin_16384": (16384, 4096, 4096, "linear"),
    "lin_128": (128, 32768, 32768, "linear"),
}
# BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages
CONFIGS = [
    (128, 128, 32, 8, 3),
    (128, 128, 32, 8, 4),
    (128, 256, 32, 8, 3),
    (128, 256, 16, 8, 4),
    (128, 128, 64, 8, 3),
    (128, 128, 16, 8, 5),
    (64, 128, 32, 4, 4),
    (128, 64, 32, 4, 4),
    (64, 64, 32, 4, 4),
]


@triton.jit
def _split(src, hi, lo, rows, cols, s_row, s_col, BLOCK: tl.constexpr):
    """src[r, c] (any strides) into contiguous [rows, cols] hi and lo, as the builtin's
    _split_tf32 splits: hi truncated to TF32, lo the rest rounded to nearest (ties away)."""
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = (r[:, None] < rows) & (c[None, :] < cols)
    x = tl.load(src + r[:, None].to(tl.int64) * s_row + c[None, :] * s_col, mask=ok)
    h = (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
    rest = x - h
    low = ((rest.to(tl.uint32, bitcast=True) + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)
    at = r[:, None].to(tl.int64) * cols + c[None, :]
    tl.store(hi + at, h, mask=ok)
    tl.store(lo + at, low, mask=ok)


@triton.jit
def _mm(a_hi, a_lo, b_hi, b_lo, c, M, N, K, SPLIT: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr):  # fmt: skip
    """C = A @ B with A [M, K] and B given as [N, K] (both K-major)."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_off = (rm % M)[:, None].to(tl.int64) * K + rk[None, :]
    b_off = (rn % N)[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(K, BLOCK_K)):
        kmask = rk < K - kk * BLOCK_K
        a = tl.load(a_hi + a_off, mask=kmask[None, :], other=0.0)
        b = tl.load(b_hi + b_off, mask=kmask[:, None], other=0.0)
        if SPLIT:
            al = tl.load(a_lo + a_off, mask=kmask[None, :], other=0.0)
            bl = tl.load(b_lo + b_off, mask=kmask[:, None], other=0.0)
            # a fresh accumulator a step, as Triton's tf32x3 (and the builtin's) has: tensor
            # cores truncate as they add, and one long sum of all three lost accuracy
            part = tl.dot(al, b, tl.zeros_like(acc), input_precision="tf32")
            part = tl.dot(a, bl, part, input_precision="tf32")
            acc += tl.dot(a, b, part, input_precision="tf32")
        else:
            acc = tl.dot(a, b, acc, input_precision="tf32x3")
        a_off += BLOCK_K
        b_off += BLOCK_K
    idx = rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(c + idx, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _operands(m: int, n: int, k: int, kind: str):
    torch.manual_seed(0)
    if kind == "rand":  # KernelBench level 1: A [M, K], B [K, N] row-major
        return torch.rand(m, k, device="cuda"), torch.rand(k, n, device="cuda")
    x = torch.randn(m, k, device="cuda")
    w = torch.empty(n, k, device="cuda").uniform_(-1 / math.sqrt(k), 1 / math.sqrt(k))
    return x, w.t()


def _split_copies(t: torch.Tensor, rows: int, cols: int, s_row: int, s_col: int):
    hi = torch.empty(rows, cols, device="cuda")
    lo = torch.empty_like(hi)
    grid = (triton.cdiv(rows, 64), triton.cdiv(cols, 64))
    _split[grid](t, hi, lo, rows, cols, s_row, s_col, BLOCK=64)
    return hi, lo


def _forward(a, b, split: bool, config):
    """The whole forward: operand copies (split, or B K-major only) and the GEMM."""
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk, warps, stages = config
    if split:
        a_hi, a_lo = _split_copies(a, m, k, a.stride(0), a.stride(1))
        b_hi, b_lo = _split_copies(b, n, k, b.stride(1), b.stride(0))
    else:
        a_hi = a_lo = a.contiguous()
        b_hi = b_lo = b.t().contiguous()
    c = torch.empty(m, n, device="cuda")
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    run = _mm[grid]
    run(a_hi, a_lo, b_hi, b_lo, c, m, n, k, SPLIT=split, BLOCK_M=bm, BLOCK_N=bn,
        BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)  # fmt: skip
    return c, lambda: run(a_hi, a_lo, b_hi, b_lo, c, m, n, k, SPLIT=split, BLOCK_M=bm,
                          BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps,
                          num_stages=stages)  # fmt: skip


def _probe(name: str, out) -> None:
    m, n, k, kind = SHAPES[name]
    a, b = _operands(m, n, k, kind)
    torch.backends.cuda.matmul.allow_tf32 = False
    expected = a @ b
    eager_ms = triton.testing.do_bench(lambda: a @ b, rep=200)
    _emit(out, {"shape": name, "variant": "eager", "ms": eager_ms})
    for split in (False, True):
        for config in CONFIGS:
            row = {"shape": name, "variant": "split" if split else "tf32x3", "config": config}
            try:
                c, gemm = _forward(a, b, split, config)
                torch.cuda.synchronize()
            except Exception as error:  # out of shared memory, say: report and go on
                _emit(out, {**row, "error": f"{type(error).__name__}: {str(error)[:200]}"})
                continue
            miss = (c - expected).abs() > 1e-4 + 1e-4 * expected.abs()
            row["max_abs_err"] = float((c - expected).abs().max())
            row["misses"] = int(miss.sum())
            del c
            forward = lambda s=split, cf=config: _forward(a, b, s, cf)  # noqa: E731
            row["ms"] = triton.testing.do_bench(forward, rep=200)
            row["gemm_ms"] = triton.testing.do_bench(gemm, rep=200)
            row["vs_eager"] = eager_ms / row["ms"]
            _emit(out, row)
            torch.cuda.empty_cache()


def _emit(out, row: dict) -> None:
    line = json.dumps(row)
    print(line, flush=True)
    if out:
        out.write(line + "\n")
        out.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out.open("a") if args.out else None
    for name in args.shapes.split(","):
        _probe(name, out)


if __name__ == "__main__":
    main()
