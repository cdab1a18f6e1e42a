"""Probe (hand-written, not the builtin's): level2/51, a mean over a Linear's outputs, rewritten.

mean_n (x W^T + b - s)[., n] = (x . sum_n W[n, .] + sum(b) - sum(s)) / N: a column sum of W and
a GEMV accumulated in float64 instead of the 2048 x 8192 x 8192 GEMM. The logsumexp over a
dimension of size 1 returns its input; GELU (erf) and the residual add follow, per row.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def column_sums(w_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols_here = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_mask = cols_here < cols
    acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float64)
    for start in range(0, rows, BLOCK_R):
        rows_here = start + tl.arange(0, BLOCK_R)
        mask = (rows_here[:, None] < rows) & col_mask[None, :]
        tile = tl.load(w_ptr + rows_here[:, None] * cols + cols_here[None, :], mask=mask, other=0.0)
        acc += tile.to(tl.float64)
    tl.store(out_ptr + cols_here, tl.sum(acc, axis=0), mask=col_mask)


@triton.jit
def mean_gelu_residual(x_ptr, v_ptr, b_ptr, s_ptr, out_ptr, cols, n_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float64)
        acc += x * tl.load(v_ptr + offs, mask=mask, other=0.0)
    shift = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, n_out, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_out
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float64)
        shift += b - tl.load(s_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    mean = ((tl.sum(acc, axis=0) + tl.sum(shift, axis=0)) / n_out).to(tl.float32)
    gelu = 0.5 * mean * (1.0 + tl.math.erf(mean * 0.7071067811865476))
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
        tl.store(out_ptr + row * cols + offs, x + gelu, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.subtract = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        x = x.contiguous()
        w, b = self.gemm.weight.contiguous(), self.gemm.bias.contiguous()
        rows, cols = w.shape
        sums = torch.empty(cols, device=x.device, dtype=torch.float64)
        column_sums[(triton.cdiv(cols, 32),)](w, sums, rows, cols, BLOCK_R=64, BLOCK_C=32)
        out = torch.empty_like(x)
        mean_gelu_residual[(x.shape[0],)](x, sums, b, self.subtract, out, cols, rows, BLOCK=1024)
        return out
