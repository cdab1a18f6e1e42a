"""Triton: the whole pointwise chain in one pass over memory (one load, one store per element)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def swish_bias_clamp_kernel(
    x_ptr,
    bias_ptr,
    y_ptr,
    n_elements,
    channels,
    plane,  # plane = HEIGHT * WIDTH, the elements of one channel
    scale,
    clamp_min,
    clamp_max,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    # int64 offsets: the flat index of a large tensor can pass 2**31.
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    # NCHW: the channel of a flat index is (index // plane) % channels.
    c = (offs // plane) % channels
    b = tl.load(bias_ptr + c, mask=mask, other=0.0)
    y = x * tl.sigmoid(x) * scale + b
    y = tl.minimum(tl.maximum(y, clamp_min), clamp_max)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels, scale, clamp_min, clamp_max):
        super().__init__()
        # Same parameter, created in the same order as Model, so the seeded values match.
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK = 4096  # big blocks: enough bytes in flight per program on a GPU, few programs on CPU
        grid = (triton.cdiv(n, BLOCK),)
        swish_bias_clamp_kernel[grid](
            x,
            self.bias,
            y,
            n,
            x.shape[1],
            x.shape[2] * x.shape[3],
            self.scale,
            self.clamp_min,
            self.clamp_max,
            BLOCK=BLOCK,
            num_warps=8,
        )
        return y
