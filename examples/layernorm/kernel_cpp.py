"""C++ (OpenMP): LayerNorm over the last dimension, rows in parallel.

Per row: a SIMD sum for the mean, a second sweep for the variance of the centred values (exact
even when the mean is large, unlike E[x^2] - E[x]^2), then one sweep that normalises and applies
the affine weight and bias. The row stays in cache between sweeps.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <cmath>
#include <cstdint>

extern "C" void layernorm_rows(const float* x, const float* w, const float* b, float* y,
                               int64_t rows, int64_t cols, double eps) {
    const float inv_n = 1.0f / static_cast<float>(cols);
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float sum = 0.0f;
        #pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < cols; ++j) sum += xr[j];
        const float mean = sum * inv_n;
        float sq = 0.0f;
        #pragma omp simd reduction(+ : sq)
        for (int64_t j = 0; j < cols; ++j) {
            const float d = xr[j] - mean;
            sq += d * d;
        }
        const float rstd = 1.0f / std::sqrt(sq * inv_n + static_cast<float>(eps));  // biased var
        #pragma omp simd
        for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
    }
}
"""

BINDINGS = r"""
#include <Python.h>
#include <cstdint>

static PyObject* kg_bind_layernorm_rows(PyObject*, PyObject* kg_args) {
    unsigned long long x, w, b, y;
    long long rows, cols;
    double eps;
    if (!PyArg_ParseTuple(kg_args, "KKKKLLd", &x, &w, &b, &y, &rows, &cols, &eps)) return nullptr;
    layernorm_rows(reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(w), reinterpret_cast<const float*>(b), reinterpret_cast<float*>(y), rows, cols, eps);
    Py_RETURN_NONE;
}
static PyMethodDef kg_methods[] = {
    {"layernorm_rows", kg_bind_layernorm_rows, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};
static PyModuleDef kg_module = {PyModuleDef_HEAD_INIT, "example_layernorm_rows", nullptr, -1,
    kg_methods};
PyMODINIT_FUNC PyInit_example_layernorm_rows() { return PyModule_Create(&kg_module); }
"""

# Built by torch into TORCH_EXTENSIONS_DIR/<name>, cached by source; without torch's headers
# (no_implicit_headers) and with Python C API bindings a cold build takes well under a second.
_lib = load_inline(
    "example_layernorm_rows",
    cpp_sources=[SOURCE, BINDINGS],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    no_implicit_headers=True,
)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        # Same module and the same random draws as Model, so the seeded parameters match.
        self.norm = nn.LayerNorm(hidden, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(hidden))
            self.norm.bias.copy_(0.1 * torch.randn(hidden))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        w, b = self.norm.weight, self.norm.bias
        rows = x.numel() // cols
        _lib.layernorm_rows(
            x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr(), rows, cols, float(self.norm.eps)
        )
        return y
