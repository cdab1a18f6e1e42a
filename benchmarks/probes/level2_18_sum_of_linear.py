"""Probe (hand-written, not the builtin's): level2/18, a sum over a Linear's outputs, rewritten.

sum_n (x W^T + b)[., n] = x . (sum_n W[n, .]) + sum_n b[n]: a column sum of W and a GEMV, both
accumulated in float64, instead of the 1024 x 8192 x 8192 GEMM. The max, mean and the two
logsumexps that follow run over a dimension of size 1, where each returns its input exactly.
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
def row_dots(x_ptr, v_ptr, b_ptr, out_ptr, cols, n_bias, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float64)
        acc += x * tl.load(v_ptr + offs, mask=mask, other=0.0)
    bias = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, n_bias, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        bias += tl.load(b_ptr + offs, mask=offs < n_bias, other=0.0).to(tl.float64)
    tl.store(out_ptr + row, (tl.sum(acc, axis=0) + tl.sum(bias, axis=0)).to(tl.float32))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        w, b = self.linear.weight.contiguous(), self.linear.bias.contiguous()
        rows, cols = w.shape
        sums = torch.empty(cols, device=x.device, dtype=torch.float64)
        column_sums[(triton.cdiv(cols, 32),)](w, sums, rows, cols, BLOCK_R=64, BLOCK_C=32)
        out = torch.empty(x.shape[0], 1, device=x.device, dtype=torch.float32)
        row_dots[(x.shape[0],)](x, sums, b, out, cols, b.numel(), BLOCK=1024)
        return out
