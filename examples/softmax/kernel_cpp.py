"""C++ (OpenMP): softmax over the last dimension, rows in parallel.

Each row takes three SIMD sweeps: its max, then exp(x - max) written to y while summing, then
y scaled by 1 / sum. The row is in cache for the last two sweeps. exp() is a small polynomial
(exp_f32) because std::exp does not vectorise without -ffast-math.
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

extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float mx = -__builtin_inff();
        #pragma omp simd reduction(max : mx)
        for (int64_t j = 0; j < cols; ++j) mx = xr[j] > mx ? xr[j] : mx;
        float sum = 0.0f;
        #pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < cols; ++j) {
            const float e = exp_f32(xr[j] - mx);  // <= 1: subtracting the max avoids overflow
            yr[j] = e;
            sum += e;
        }
        const float inv = 1.0f / sum;
        #pragma omp simd
        for (int64_t j = 0; j < cols; ++j) yr[j] *= inv;
    }
}
"""

BINDINGS = r"""
#include <Python.h>
#include <cstdint>

static PyObject* kg_bind_softmax_rows(PyObject*, PyObject* kg_args) {
    unsigned long long x, y;
    long long rows, cols;
    if (!PyArg_ParseTuple(kg_args, "KKLL", &x, &y, &rows, &cols)) return nullptr;
    softmax_rows(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), rows, cols);
    Py_RETURN_NONE;
}
static PyMethodDef kg_methods[] = {
    {"softmax_rows", kg_bind_softmax_rows, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};
static PyModuleDef kg_module = {PyModuleDef_HEAD_INIT, "example_softmax_rows", nullptr, -1,
    kg_methods};
PyMODINIT_FUNC PyInit_example_softmax_rows() { return PyModule_Create(&kg_module); }
"""

# Built by torch into TORCH_EXTENSIONS_DIR/<name>, cached by source; without torch's headers
# (no_implicit_headers) and with Python C API bindings a cold build takes well under a second.
_lib = load_inline(
    "example_softmax_rows",
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
        y = torch.empty_like(x)
        cols = x.shape[-1]
        _lib.softmax_rows(x.data_ptr(), y.data_ptr(), x.numel() // cols, cols)
        return y
