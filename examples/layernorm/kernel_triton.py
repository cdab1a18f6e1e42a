"""Triton: LayerNorm over the last dimension, one program per row.

Two kernels, chosen by row length:
- layernorm_row_kernel: the whole row fits in one block; it is loaded once, and the mean and
  the variance (of the centred values, which is exact even when the mean is large) come from
  registers.
- layernorm_long_row_kernel: longer rows are walked in chunks three times (mean, variance,
  normalise); registers stay bounded for any row length.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_FUSED_BLOCK = 8192  # longest row held in registers at once


@triton.jit
def layernorm_row_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)  # padding lanes must not add (0 - mean)^2
    var = tl.sum(xc * xc, axis=0) / n_cols  # biased variance, as nn.LayerNorm uses
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_y + cols, xc * rstd * w + b, mask=mask)


@triton.jit
def layernorm_long_row_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y

    # Pass 1: mean.
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols

    # Pass 2: variance of the centred values.
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        xc = tl.where(mask, x - mean, 0.0)
        acc += xc * xc
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)

    # Pass 3: normalise and apply the affine parameters.
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(y_row + cols, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        # Same module and the same random draws as Model, so the seeded parameters match.
        self.norm = nn.LayerNorm(hidden, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(hidden))
            self.norm.bias.copy_(0.1 * torch.randn(hidden))

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        y = torch.empty_like(x2)
        n_rows = x2.shape[0]
        w, b, eps = self.norm.weight, self.norm.bias, self.norm.eps
        block = triton.next_power_of_2(n_cols)
        if block <= MAX_FUSED_BLOCK:
            num_warps = min(16, max(1, block // 512))  # about 16 elements per thread
            layernorm_row_kernel[(n_rows,)](
                x2,
                w,
                b,
                y,
                n_cols,
                x2.stride(0),
                y.stride(0),
                eps,
                BLOCK=block,
                num_warps=num_warps,
            )
        else:
            layernorm_long_row_kernel[(n_rows,)](
                x2,
                w,
                b,
                y,
                n_cols,
                x2.stride(0),
                y.stride(0),
                eps,
                BLOCK=2048,
                num_warps=8,
            )
        return y.view(x.shape)
