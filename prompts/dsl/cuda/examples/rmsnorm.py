"""CUDA C: RMSNorm over the last dimension, one thread block per row, via load_inline.

Each thread sums the squares of its strided share of the row (coalesced: consecutive threads
read consecutive columns); the partial sums are reduced within each warp with xor-shuffles,
then across the block's warps through shared memory. Every thread then writes
x * rsqrt(mean + eps) * w for its columns; the second read of the row mostly hits L1/L2.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAStream.h>

constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;

__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__global__ __launch_bounds__(THREADS) void
rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
               int64_t cols, float eps) {
    const float* xr = x + (int64_t)blockIdx.x * cols;
    float* yr = y + (int64_t)blockIdx.x * cols;

    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += THREADS) ss = fmaf(xr[j], xr[j], ss);
    ss = warp_sum(ss);

    __shared__ float partial[WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) partial[warp] = ss;
    __syncthreads();
    if (warp == 0) {  // the whole first warp takes part, so the full shuffle mask is valid
        float t = lane < WARPS ? partial[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) partial[0] = t;
    }
    __syncthreads();
    const float scale = rsqrtf(partial[0] / (float)cols + eps);

    for (int64_t j = threadIdx.x; j < cols; j += THREADS) yr[j] = xr[j] * scale * w[j];
}

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "x: contiguous float32 CUDA tensor");
    TORCH_CHECK(w.is_cuda() && w.is_contiguous() && w.scalar_type() == torch::kFloat32,
                "w: contiguous float32 CUDA tensor");
    const int64_t cols = x.size(-1);
    TORCH_CHECK(w.numel() == cols, "w must have one value per column");
    auto y = torch::empty_like(x);
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    if (rows == 0) return y;
    rmsnorm_kernel<<<rows, THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps);"

rmsnorm_ext = load_inline(
    name="prompt_example_rmsnorm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rmsnorm"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))  # same draw as Model
        self.eps = eps

    def forward(self, x):
        return rmsnorm_ext.rmsnorm(x.contiguous(), self.weight.contiguous(), float(self.eps))
