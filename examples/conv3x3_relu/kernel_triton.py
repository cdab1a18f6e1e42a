"""Triton: 3x3 convolution (stride 1, padding 1) + bias + ReLU as an implicit GEMM.

View the convolution as a GEMM: rows are output pixels (n, oh, ow), columns are output
channels, and the reduction runs over (kh, kw, input channel). Each program computes a
BLOCK_M-pixels x BLOCK_N-channels tile; for every tap (kh, kw) it gathers the shifted input
pixels (zero outside the image: that is the padding) and multiplies them by that tap's weights.
No im2col buffer is ever written.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _to_tf32(x):
    """fp32 rounded to TF32's 10-bit mantissa, to nearest with ties to even, as cuDNN rounds
    (tl.dot's own "tf32" conversion does not round so)."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def conv3x3_relu_kernel(
    x_ptr,
    w_ptr,
    bias_ptr,
    y_ptr,
    BATCH,
    C_IN,
    C_OUT,
    H,
    W,
    stride_xn,
    stride_xc,
    stride_xh,
    stride_xw,
    stride_wo,
    stride_wi,
    stride_wh,
    stride_ww,
    stride_yn,
    stride_yc,
    stride_yh,
    stride_yw,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_C: tl.constexpr,
    TF32: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)

    # Output pixels of this tile; consecutive pixels run along W, so loads are coalesced.
    p = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    p_mask = p < BATCH * H * W
    n = p // (H * W)
    oh = (p // W) % H
    ow = p % W
    co = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    co_mask = co < C_OUT
    x_base = x_ptr + n.to(tl.int64) * stride_xn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kh in tl.static_range(3):
        for kw in tl.static_range(3):
            ih = oh + kh - 1
            iw = ow + kw - 1
            # Taps that fall outside the image read zeros: padding=1 without a padded copy.
            in_img = p_mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            pix_off = ih * stride_xh + iw * stride_xw
            for c0 in range(0, C_IN, BLOCK_C):
                ci = c0 + tl.arange(0, BLOCK_C)
                ci_mask = ci < C_IN
                a = tl.load(
                    x_base[:, None] + pix_off[:, None] + ci[None, :] * stride_xc,
                    mask=in_img[:, None] & ci_mask[None, :],
                    other=0.0,
                )
                # (BLOCK_C, BLOCK_N) slice of the weights for tap (kh, kw).
                b = tl.load(
                    w_ptr
                    + ci[:, None] * stride_wi
                    + co[None, :] * stride_wo
                    + kh * stride_wh
                    + kw * stride_ww,
                    mask=ci_mask[:, None] & co_mask[None, :],
                    other=0.0,
                )
                if TF32:  # as cuDNN: operands rounded to TF32 (nearest, ties to even)
                    acc = tl.dot(_to_tf32(a), _to_tf32(b), acc, input_precision="tf32")
                else:
                    acc = tl.dot(a, b, acc, input_precision="ieee")  # exact fp32

    bias = tl.load(bias_ptr + co, mask=co_mask, other=0.0)
    out = tl.maximum(acc + bias[None, :], 0.0)
    y_ptrs = (
        y_ptr
        + n.to(tl.int64)[:, None] * stride_yn
        + co[None, :] * stride_yc
        + oh[:, None] * stride_yh
        + ow[:, None] * stride_yw
    )
    tl.store(y_ptrs, out, mask=p_mask[:, None] & co_mask[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        # Same module as Model, so the seeded weight and bias match; it is never called.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)

    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight
        B, C_in, H, W = x.shape
        C_out = w.shape[0]
        y = torch.empty((B, C_out, H, W), device=x.device, dtype=torch.float32)
        # tl.dot needs every tile dimension >= 16; 16 input channels per step measured fastest.
        BLOCK_M = 128
        BLOCK_N = max(16, min(64, triton.next_power_of_2(C_out)))
        BLOCK_C = 16
        # Match the reference: on a GPU, cuDNN computes fp32 convolutions in TF32 while
        # torch.backends.cudnn.allow_tf32 is on (PyTorch's default, and KernelBench's).
        tf32 = x.is_cuda and torch.backends.cudnn.allow_tf32
        grid = (triton.cdiv(B * H * W, BLOCK_M), triton.cdiv(C_out, BLOCK_N))
        conv3x3_relu_kernel[grid](
            x,
            w,
            self.conv.bias,
            y,
            B,
            C_in,
            C_out,
            H,
            W,
            x.stride(0),
            x.stride(1),
            x.stride(2),
            x.stride(3),
            w.stride(0),
            w.stride(1),
            w.stride(2),
            w.stride(3),
            y.stride(0),
            y.stride(1),
            y.stride(2),
            y.stride(3),
            BLOCK_M=BLOCK_M,
            BLOCK_N=BLOCK_N,
            BLOCK_C=BLOCK_C,
            TF32=tf32,
            num_warps=4,
            num_stages=2,
        )
        return y
