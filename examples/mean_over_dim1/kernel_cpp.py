"""C++ (OpenMP): mean over the middle dimension of a (B, R, N) tensor.

Threads split (batch, column chunk) pairs. Each keeps a chunk of column sums in a small local
array and adds the R rows into it with contiguous SIMD loops, so x is read once, in order.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <cstdint>

constexpr int64_t CHUNK = 512;  // columns summed per task: 2 KB of accumulators, stays in L1

extern "C" void mean_dim1(const float* x, float* y, int64_t B, int64_t R, int64_t N) {
    const int64_t chunks = (N + CHUNK - 1) / CHUNK;
    const float inv_r = 1.0f / static_cast<float>(R);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t n0 = ch * CHUNK;
            const int64_t len = (N - n0 < CHUNK) ? N - n0 : CHUNK;
            float acc[CHUNK] = {};
            for (int64_t r = 0; r < R; ++r) {
                const float* row = x + (b * R + r) * N + n0;
                #pragma omp simd
                for (int64_t j = 0; j < len; ++j) acc[j] += row[j];
            }
            float* out = y + b * N + n0;
            #pragma omp simd
            for (int64_t j = 0; j < len; ++j) out[j] = acc[j] * inv_r;
        }
    }
}
"""

BINDINGS = r"""
#include <cstdint>
#include <pybind11/pybind11.h>
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("mean_dim1", [](uintptr_t x, uintptr_t y, int64_t B, int64_t R, int64_t N) {
        mean_dim1(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), B, R, N);
    });
}
"""

# Built by torch into TORCH_EXTENSIONS_DIR/<name>, cached by source; without torch's headers
# (no_implicit_headers) a cold build takes a few seconds.
_lib = load_inline(
    "example_mean_dim1",
    cpp_sources=[SOURCE, BINDINGS],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    no_implicit_headers=True,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        B, R, N = x.shape
        y = torch.empty((B, N), dtype=x.dtype, device=x.device)
        _lib.mean_dim1(x.data_ptr(), y.data_ptr(), B, R, N)
        return y
