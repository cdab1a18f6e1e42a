"""CUDA C: softmax over the last dimension, one thread block per row, via load_inline.

Pass 1: each thread walks its strided share of the row keeping an online (max, sum of
exp(x - max)) pair; the pairs are merged across the warp with shuffles, then across warps
through shared memory. Pass 2: every thread writes exp(x - max) / sum for its share.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAStream.h>

constexpr int THREADS = 512;
constexpr int WARPS = THREADS / 32;

// Merge two (max, sum) pairs: rescale each sum to the larger max. An empty pair has
// max = -inf and sum = 0, and must not turn into nan (-inf - -inf).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float mx = fmaxf(m, m2);
    if (mx == -INFINITY) return;
    s = s * expf(m - mx) + s2 * expf(m2 - mx);
    m = mx;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        const float m2 = __shfl_xor_sync(0xffffffff, m, offset);
        const float s2 = __shfl_xor_sync(0xffffffff, s, offset);
        merge(m, s, m2, s2);
    }
}

__global__ void __launch_bounds__(THREADS)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;

    // Pass 1: online max and sum over this thread's columns (coalesced: stride THREADS).
    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += THREADS) {
        const float v = xr[j];
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    warp_merge(m, s);

    // One pair per warp goes through shared memory; warp 0 merges them and publishes the row's.
    __shared__ float warp_m[WARPS], warp_s[WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        warp_m[warp] = m;
        warp_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < WARPS ? warp_m[lane] : -INFINITY;
        s = lane < WARPS ? warp_s[lane] : 0.0f;
        warp_merge(m, s);
        if (lane == 0) {
            warp_m[0] = m;
            warp_s[0] = s;
        }
    }
    __syncthreads();
    const float row_max = warp_m[0];
    const float inv_sum = 1.0f / warp_s[0];

    // Pass 2: normalise.
    for (int j = threadIdx.x; j < cols; j += THREADS) yr[j] = expf(xr[j] - row_max) * inv_sum;
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "input must be a contiguous 2-D tensor");
    auto y = torch::empty_like(x);
    const int rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    softmax_rows<<<rows, THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

cpp_source = "torch::Tensor softmax_cuda(torch::Tensor x);"

softmax_ext = load_inline(
    name="example_softmax_rows",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        cols = x.shape[-1]
        y = softmax_ext.softmax_cuda(x.view(-1, cols))
        return y.view(x.shape)
