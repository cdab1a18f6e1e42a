"""Triton: SwiGLU gate y = silu(a) * b, one flat pass over memory.

Pointwise: each program handles BLOCK consecutive elements of the flattened (contiguous)
tensors and the mask covers the tail. The math runs in fp32 and is cast back to the output's
dtype at the store, so fp16/bf16 inputs keep full-precision arithmetic.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # int64 offsets: a flat index can pass 2**31 on large tensors.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        y = torch.empty_like(a)
        n = a.numel()
        # 4096 elements per program: many bytes in flight per program on a GPU, and few
        # programs for the CPU interpreter.
        BLOCK = 4096
        silu_mul_kernel[(triton.cdiv(n, BLOCK),)](a, b, y, n, BLOCK=BLOCK, num_warps=8)
        return y
