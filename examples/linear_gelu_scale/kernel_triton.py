"""Triton: y = GELU(x @ W^T + b) * scale as a tiled GEMM with the epilogue fused.

Two kernels:
- transpose_kernel copies nn.Linear's (OUT, IN) weight to a (IN, OUT) W^T. The fp32 (FMA) path
  of tl.dot is about twice as fast when its second operand is contiguous along N, as W^T is,
  than when it is contiguous along K, as W is; the copy is a bandwidth-bound pass over W that
  costs about 1% of the GEMM.
- linear_gelu_scale_kernel is the tiled GEMM of examples/matmul; bias, exact-erf GELU and scale
  are applied to the fp32 accumulator tile in registers before its single store.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(src_ptr, dst_ptr, rows, cols, stride_src, stride_dst, BLOCK: tl.constexpr):
    # dst[c, r] = src[r, c] for one BLOCK x BLOCK tile; both sides are read / written along
    # their contiguous dimension (Triton reshuffles the tile through shared memory).
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    tile = tl.load(src_ptr + r[:, None] * stride_src + c[None, :], mask=mask)
    tl.store(dst_ptr + c[None, :] * stride_dst + r[:, None], tile, mask=mask)


@triton.jit
def linear_gelu_scale_kernel(
    x_ptr,
    w_ptr,
    bias_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wk,
    stride_wn,
    stride_ym,
    stride_yn,
    scale,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Grouped ordering of the output tiles, for L2 reuse of x and W tiles.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x_mask = (offs_m[:, None] < M) & (offs_k[None, :] < K - k0)
        w_mask = (offs_k[:, None] < K - k0) & (offs_n[None, :] < N)
        a = tl.load(x_ptrs, mask=x_mask, other=0.0)
        b = tl.load(w_ptrs, mask=w_mask, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")  # fp32 products, no TF32
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    # Epilogue on the accumulator: bias, GELU(v) = v/2 * (1 + erf(v / sqrt(2))), scale.
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    v = acc + bias[None, :]
    v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    v = v * scale

    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    y_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(y_ptrs, v, mask=y_mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        # Same module as Model, so the seeded weight and bias match; it is never called.
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        M, K = x.shape
        N = w.shape[0]
        w_t = torch.empty((K, N), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(N, 64), triton.cdiv(K, 64))
        transpose_kernel[grid](w, w_t, N, K, w.stride(0), w_t.stride(0), BLOCK=64, num_warps=4)

        y = torch.empty((M, N), device=x.device, dtype=torch.float32)
        BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 32
        grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        linear_gelu_scale_kernel[grid](
            x,
            w_t,
            self.linear.bias,
            y,
            M,
            N,
            K,
            x.stride(0),
            x.stride(1),
            w_t.stride(0),
            w_t.stride(1),
            y.stride(0),
            y.stride(1),
            self.scale,
            BLOCK_M=BLOCK_M,
            BLOCK_N=BLOCK_N,
            BLOCK_K=BLOCK_K,
            GROUP_M=8,
            num_warps=8,
            num_stages=3,
        )
        return y
