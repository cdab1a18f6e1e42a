"""C++ (OpenMP): the pointwise chain, one parallel pass over memory.

Each (batch, channel) plane shares one bias value, so the loop runs over planes in parallel and
over the contiguous plane with SIMD. exp() is a small polynomial (exp_f32) instead of std::exp,
which the compiler cannot vectorise without -ffast-math; it is accurate to about 1 ulp.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <cstdint>

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

extern "C" void swish_bias_clamp(const float* x, const float* bias, float* y, int64_t batch,
                                 int64_t channels, int64_t plane, double scale, double lo,
                                 double hi) {
    const float s = static_cast<float>(scale);
    const float mn = static_cast<float>(lo), mx = static_cast<float>(hi);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
        for (int64_t c = 0; c < channels; ++c) {
            const int64_t base = (b * channels + c) * plane;
            const float bc = bias[c];
            #pragma omp simd
            for (int64_t i = 0; i < plane; ++i) {
                const float v = x[base + i];
                float t = v / (1.0f + exp_f32(-v)) * s + bc;  // x * sigmoid(x) * scale + bias
                t = t < mn ? mn : t;
                y[base + i] = t > mx ? mx : t;
            }
        }
    }
}
"""

BINDINGS = r"""
#include <Python.h>
#include <cstdint>

static PyObject* kg_bind_swish_bias_clamp(PyObject*, PyObject* kg_args) {
    unsigned long long x, bias, y;
    long long batch, channels, plane;
    double scale, lo, hi;
    if (!PyArg_ParseTuple(kg_args, "KKKLLLddd", &x, &bias, &y, &batch, &channels, &plane, &scale, &lo, &hi)) return nullptr;
    swish_bias_clamp(reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(bias), reinterpret_cast<float*>(y), batch, channels, plane, scale, lo, hi);
    Py_RETURN_NONE;
}
static PyMethodDef kg_methods[] = {
    {"swish_bias_clamp", kg_bind_swish_bias_clamp, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};
static PyModuleDef kg_module = {PyModuleDef_HEAD_INIT, "example_swish_bias_clamp", nullptr, -1,
    kg_methods};
PyMODINIT_FUNC PyInit_example_swish_bias_clamp() { return PyModule_Create(&kg_module); }
"""

# Built by torch into TORCH_EXTENSIONS_DIR/<name>, cached by source; without torch's headers
# (no_implicit_headers) and with Python C API bindings a cold build takes well under a second.
_lib = load_inline(
    "example_swish_bias_clamp",
    cpp_sources=[SOURCE, BINDINGS],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    no_implicit_headers=True,
)


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
        B, C, H, W = x.shape
        _lib.swish_bias_clamp(
            x.data_ptr(),
            self.bias.data_ptr(),
            y.data_ptr(),
            B,
            C,
            H * W,
            float(self.scale),
            float(self.clamp_min),
            float(self.clamp_max),
        )
        return y
