"""Triton kernel with a type error: a pointer multiplied by a float does not compile."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 16384


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr * 2.0 + offs, mask=mask)  # type error: pointer * float
    tl.store(y_ptr + offs, x + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        scale_add_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
        return y
