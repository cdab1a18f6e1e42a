"""Row-stationary small-K GEMM variants: a program keeps its A rows and sweeps N tiles."""
import sys

TEMPLATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _split_tf32(src, dst, span, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < span)
    hi = (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
    rest = tl.where(hi == x, 0.0, x - hi)
    tl.store(dst + offs, hi, mask=offs < span)
    tl.store(dst + span + offs, ((rest.to(tl.uint32, bitcast=True) + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True), mask=offs < span)


@triton.jit
def _hi(x):
    return (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def _lo(x, hi):
    rest = tl.where(hi == x, 0.0, x - hi)
    return ((rest.to(tl.uint32, bitcast=True) + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def mm_rows(a_ptr, b_ptr, c, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr,
            BLOCK_N: tl.constexpr, N_PER_PROG: tl.constexpr, STAGES: tl.constexpr, MODE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    if MODE == "presplit":
        a_lo = tl.load(a_ptr + M * K + rm[:, None] * K + rk[None, :])
    elif MODE == "split":
        a_hi = _hi(a)
        a_lo = _lo(a, a_hi)
        a = a_hi
    n0 = pid_n * N_PER_PROG
    for n in tl.range(n0, n0 + N_PER_PROG, BLOCK_N, num_stages=STAGES):
        rn = n + tl.arange(0, BLOCK_N)
        b = tl.load(b_ptr + rk[:, None] + rn[None, :] * K)
        if MODE == "presplit":
            b_lo = tl.load(b_ptr + N * K + rk[:, None] + rn[None, :] * K)
            acc = tl.dot(a_lo, b, input_precision="tf32")
            acc = tl.dot(a, b_lo, acc, input_precision="tf32")
            acc = tl.dot(a, b, acc, input_precision="tf32")
        elif MODE == "split":
            b_hi = _hi(b)
            b_lo = _lo(b, b_hi)
            acc = tl.dot(a_lo, b_hi, input_precision="tf32")
            acc = tl.dot(a, b_lo, acc, input_precision="tf32")
            acc = tl.dot(a, b_hi, acc, input_precision="tf32")
        elif MODE == "tf32x3":
            acc = tl.dot(a, b, input_precision="tf32x3")
        else:
            acc = tl.dot(a, b, input_precision="tf32")
        tl.store(c + rm[:, None] * N + rn[None, :], acc)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        M, K = x0.shape
        N = x1.shape[1]
        a = x0.contiguous()
        b = x1.t().contiguous()
        if MODE == "presplit":
            a_split = torch.empty((2 * M, K), device=a.device, dtype=torch.float32)
            _split_tf32[(triton.cdiv(M * K, 1024),)](a, a_split, M * K, BLOCK=1024)
            b_split = torch.empty((2 * N, K), device=a.device, dtype=torch.float32)
            _split_tf32[(triton.cdiv(N * K, 1024),)](b, b_split, N * K, BLOCK=1024)
            a, b = a_split, b_split
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        per = N // NSPLIT
        mm_rows[(M // BM, NSPLIT)](a, b, c, M, N, K, BLOCK_M=BM, BLOCK_N=BN, N_PER_PROG=per, STAGES=STAGES, MODE=MODE, num_warps=WARPS)
        return c
'''


def write(path, bm, bn, warps, nsplit, stages, mode):
    head = f"BM, BN, WARPS, NSPLIT, STAGES, MODE = {bm}, {bn}, {warps}, {nsplit}, {stages}, {mode!r}\n"
    open(path, "w").write(head + TEMPLATE)


if __name__ == "__main__":
    out = sys.argv[1]
    for mode in ["presplit", "split"]:
        for bm, bn, w, ns, st in [(64, 128, 4, 4, 3), (64, 128, 4, 8, 3), (128, 128, 8, 4, 3), (128, 128, 8, 8, 2),
                                  (128, 64, 4, 8, 3), (64, 64, 4, 8, 4), (128, 256, 8, 8, 2), (64, 256, 4, 8, 2)]:
            write(f"{out}/rows_{mode}_{bm}x{bn}w{w}n{ns}s{st}.py", bm, bn, w, ns, st, mode)
    write(f"{out}/rows_tf32_128x128w8n8s3.py", 128, 128, 8, 8, 3, "tf32")
    write(f"{out}/rows_tf32_64x128w4n8s3.py", 64, 128, 4, 8, 3, "tf32")
    write(f"{out}/rows_tf32x3_64x128w4n8s3.py", 64, 128, 4, 8, 3, "tf32x3")
