"""Probe (hand-written, not the builtin's): level2/98, an average pool over a Linear's outputs.

AvgPool1d(k) over the N axis of x W^T + b is x W'^T + b' with W' the means of W's rows in each
window of k (and b' of b's): a GEMM with N / k columns instead of N. W' is formed in float64
and rounded once; the GEMM runs tf32x3 on tensor cores; GELU, the scale and the row max follow.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def window_means(w_ptr, b_ptr, w_out, b_out, cols, K_POOL: tl.constexpr, BLOCK: tl.constexpr):
    window = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < cols
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for r in range(K_POOL):
        row = window * K_POOL + r
        acc += tl.load(w_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float64)
    tl.store(w_out + window * cols + offs, (acc / K_POOL).to(tl.float32), mask=mask)
    if tl.program_id(1) == 0:
        bias = tl.load(b_ptr + window * K_POOL + tl.arange(0, K_POOL)).to(tl.float64)
        tl.store(b_out + window, (tl.sum(bias, axis=0) / K_POOL).to(tl.float32))


@triton.jit
def linear_tf32x3(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + rows[:, None] * K + ks[None, :], mask=rows[:, None] < M, other=0.0)
        b = tl.load(w_ptr + cols[None, :] * K + ks[:, None], mask=cols[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
    acc += tl.load(b_ptr + cols, mask=cols < N, other=0.0)[None, :]
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], acc, mask=mask)


@triton.jit
def gelu_scale_max(y_ptr, out_ptr, N, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    y = tl.load(y_ptr + row * N + offs, mask=offs < N, other=0.0)
    g = 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476)) * scale
    tl.store(out_ptr + row, tl.max(tl.where(offs < N, g, -float("inf")), axis=0))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, pool_kernel_size, scale_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.pool = pool_kernel_size
        self.scale_factor = scale_factor

    def forward(self, x):
        x = x.contiguous()
        w, b = self.matmul.weight.contiguous(), self.matmul.bias.contiguous()
        n_out, k = w.shape
        windows = n_out // self.pool
        w2 = torch.empty(windows, k, device=x.device, dtype=torch.float32)
        b2 = torch.empty(windows, device=x.device, dtype=torch.float32)
        window_means[(windows, triton.cdiv(k, 1024))](w, b, w2, b2, k, K_POOL=self.pool, BLOCK=1024)
        m = x.shape[0]
        y = torch.empty(m, windows, device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(m, 128), triton.cdiv(windows, 64))
        linear_tf32x3[grid](
            x,
            w2,
            b2,
            y,
            m,
            windows,
            k,
            BLOCK_M=128,
            BLOCK_N=64,
            BLOCK_K=32,
            num_warps=8,
            num_stages=3,
        )
        out = torch.empty(m, device=x.device, dtype=torch.float32)
        gelu_scale_max[(m,)](
            y, out, windows, self.scale_factor, BLOCK=triton.next_power_of_2(windows)
        )
        return out
