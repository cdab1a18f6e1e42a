"""C++ (OpenMP): y = GELU(x @ W^T + b) * scale as a blocked GEMM with a fused epilogue.

The GEMM is the one of examples/matmul (MC x NC tiles per thread, KC-deep slabs, an MR x NR
register micro-kernel), except that the slab of W^T is packed straight from nn.Linear's
(OUT, IN) weight, transposing as it copies. Once a tile's K loop ends, bias, exact-erf GELU and
scale are applied to it while it is still in cache; erf and exp are short polynomials there
(erf_f32, exp_f32) because std::erf and std::exp do not vectorise without -ffast-math.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#if defined(__AVX512F__)
// GCC defaults to 256-bit vectors even where 512-bit ones exist; the GEMM wants the wide ones.
#pragma GCC target("prefer-vector-width=512")
#endif
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#if defined(__AVX512F__)
constexpr int64_t NR = 32;  // micro-tile width: two 512-bit vectors
#else
constexpr int64_t NR = 16;  // two 256-bit vectors
#endif
constexpr int64_t MR = 6;    // micro-tile height: 12 accumulator vectors
constexpr int64_t KC = 256;  // depth of a W^T slab
constexpr int64_t NC = 256;  // width of a y tile (multiple of NR)
constexpr int64_t MC = 96;   // height of a y tile (multiple of MR)

// exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln(2) / 2; exp(r) by its degree-7
// Taylor polynomial (error < 1e-8). Plain float arithmetic only, so it vectorises in `omp simd`.
static inline float exp_f32(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);  // keep 2^n a normal float
    // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer.
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-6f;  // ln 2 = hi + lo
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    // 2^n built directly from its exponent bits.
    const float two_n = __builtin_bit_cast(float, (static_cast<int32_t>(n) + 127) << 23);
    return p * two_n;
}

// erf(x) by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7), odd-extended to x < 0.
// Unlike std::erf it vectorises, so the epilogue runs at SIMD speed.
static inline float erf_f32(float x) {
    const float ax = x < 0.0f ? -x : x;
    const float t = 1.0f / (1.0f + 0.3275911f * ax);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    const float y = 1.0f - p * t * exp_f32(-ax * ax);
    return x < 0.0f ? -y : y;
}

// Pack (W^T)[k0 : k0+kc, j0 : j0+nc] into NR-wide strips (strip s: kc rows of NR floats).
// (W^T)[k, j] = W[j, k]: each output feature j is a contiguous row of W, read in order.
// Features past N become zero columns.
static void pack_wt(const float* W, int64_t ldw, int64_t N, int64_t k0, int64_t kc, int64_t j0,
                    int64_t nc, float* Bp) {
    for (int64_t s = 0; s < nc; s += NR) {
        float* strip = Bp + s * kc;
        for (int64_t c = 0; c < NR; ++c) {
            const int64_t j = j0 + s + c;
            if (j < N) {
                const float* src = W + j * ldw + k0;
                for (int64_t k = 0; k < kc; ++k) strip[k * NR + c] = src[k];
            } else {
                for (int64_t k = 0; k < kc; ++k) strip[k * NR + c] = 0.0f;
            }
        }
    }
}

// y[0:mr, 0:nr] = (y +) x[0:mr, 0:kc] @ strip, with the MR x NR sums held in registers.
static inline void micro_kernel(const float* A, int64_t lda, const float* strip, int64_t kc,
                                float* C, int64_t ldc, int64_t mr, int64_t nr, bool accumulate) {
    float acc[MR][NR] = {};
    const float* a[MR];
    for (int64_t r = 0; r < MR; ++r) a[r] = A + (r < mr ? r : 0) * lda;  // spare rows: computed, not stored
    for (int64_t k = 0; k < kc; ++k) {
        const float* b = strip + k * NR;
        #pragma GCC unroll 6
        for (int64_t r = 0; r < MR; ++r) {
            const float av = a[r][k];
            #pragma omp simd
            for (int64_t c = 0; c < NR; ++c) acc[r][c] += av * b[c];
        }
    }
    for (int64_t r = 0; r < mr; ++r) {
        float* cr = C + r * ldc;
        for (int64_t c = 0; c < nr; ++c) cr[c] = accumulate ? cr[c] + acc[r][c] : acc[r][c];
    }
}

extern "C" void linear_gelu_scale(const float* x, const float* W, const float* bias, float* y,
                                  int64_t M, int64_t N, int64_t K, double scale) {
    const float s = static_cast<float>(scale);
    #pragma omp parallel
    {
        float* Bp = static_cast<float*>(std::aligned_alloc(64, KC * NC * sizeof(float)));
        #pragma omp for collapse(2) schedule(dynamic)
        for (int64_t i0 = 0; i0 < M; i0 += MC) {
            for (int64_t j0 = 0; j0 < N; j0 += NC) {
                const int64_t mc = std::min(MC, M - i0), nc = std::min(NC, N - j0);
                if (K == 0) {  // an empty sum: the GEMM part is zero
                    for (int64_t i = 0; i < mc; ++i) std::fill_n(y + (i0 + i) * N + j0, nc, 0.0f);
                }
                for (int64_t k0 = 0; k0 < K; k0 += KC) {
                    const int64_t kc = std::min(KC, K - k0);
                    pack_wt(W, K, N, k0, kc, j0, nc, Bp);
                    for (int64_t st = 0; st < nc; st += NR) {
                        for (int64_t i = 0; i < mc; i += MR) {
                            micro_kernel(x + (i0 + i) * K + k0, K, Bp + st * kc, kc,
                                         y + (i0 + i) * N + j0 + st, N, std::min(MR, mc - i),
                                         std::min(NR, nc - st), k0 > 0);
                        }
                    }
                }
                // Epilogue on the finished tile: GELU(v) = v/2 * (1 + erf(v / sqrt(2))), scaled.
                for (int64_t i = 0; i < mc; ++i) {
                    float* row = y + (i0 + i) * N + j0;
                    #pragma omp simd
                    for (int64_t j = 0; j < nc; ++j) {
                        const float v = row[j] + bias[j0 + j];
                        row[j] = 0.5f * v * (1.0f + erf_f32(v * 0.70710678118654752f)) * s;
                    }
                }
            }
        }
        std::free(Bp);
    }
}
"""

BINDINGS = r"""
#include <Python.h>
#include <cstdint>

static PyObject* kg_bind_linear_gelu_scale(PyObject*, PyObject* kg_args) {
    unsigned long long x, W, bias, y;
    long long M, N, K;
    double scale;
    if (!PyArg_ParseTuple(kg_args, "KKKKLLLd", &x, &W, &bias, &y, &M, &N, &K, &scale)) return nullptr;
    linear_gelu_scale(reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(W), reinterpret_cast<const float*>(bias), reinterpret_cast<float*>(y), M, N, K, scale);
    Py_RETURN_NONE;
}
static PyMethodDef kg_methods[] = {
    {"linear_gelu_scale", kg_bind_linear_gelu_scale, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};
static PyModuleDef kg_module = {PyModuleDef_HEAD_INIT, "example_linear_gelu_scale", nullptr, -1,
    kg_methods};
PyMODINIT_FUNC PyInit_example_linear_gelu_scale() { return PyModule_Create(&kg_module); }
"""

# Built by torch into TORCH_EXTENSIONS_DIR/<name>, cached by source; without torch's headers
# (no_implicit_headers) and with Python C API bindings a cold build takes well under a second.
_lib = load_inline(
    "example_linear_gelu_scale",
    cpp_sources=[SOURCE, BINDINGS],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    no_implicit_headers=True,
)


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
        y = torch.empty((M, N), dtype=torch.float32, device=x.device)
        bias = self.linear.bias
        _lib.linear_gelu_scale(
            x.data_ptr(), w.data_ptr(), bias.data_ptr(), y.data_ptr(), M, N, K, float(self.scale)
        )
        return y
