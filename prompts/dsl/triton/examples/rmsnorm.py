"""Triton: RMSNorm over the last dimension, y = x * rsqrt(mean(x^2) + eps) * weight.

One program per row. Pass 1 accumulates the sum of squares per lane in fp32 over BLOCK-wide
chunks, then reduces the lanes; pass 2 re-reads the row (from cache when it is short) and writes
the normalised values. The chunk loop bounds the registers for any row length; when the row
fits in one chunk, each loop runs once. ModelNew creates its weight exactly as Model does, so
the harness's identical seeding gives both the same values.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y

    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x  # padding lanes loaded 0.0: they add nothing
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)

    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))  # same draw as Model
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        y = torch.empty_like(x2)
        block = min(triton.next_power_of_2(n_cols), 4096)
        num_warps = min(8, max(1, block // 256))  # about 8 elements per thread per chunk
        rmsnorm_kernel[(x2.shape[0],)](
            x2,
            self.weight,
            y,
            n_cols,
            x2.stride(0),
            y.stride(0),
            self.eps,
            BLOCK=block,
            num_warps=num_warps,
        )
        return y.view(x.shape)
