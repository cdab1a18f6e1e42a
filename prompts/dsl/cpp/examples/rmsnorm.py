"""C++ (OpenMP): RMSNorm over the last dimension, rows in parallel (float32).

Each thread takes whole rows: a SIMD sum of squares (`omp simd reduction`), then one SIMD
sweep writing x * scale * weight while the row is still in L1/L2. ModelNew creates its weight
exactly as Model does, so the harness's identical seeding gives both the same values.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm(const float* __restrict__ x, const float* __restrict__ w,
                        float* __restrict__ y, int64_t rows, int64_t cols, double eps) {
    const float e = static_cast<float>(eps);
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float ss = 0.0f;
        #pragma omp simd reduction(+ : ss)
        for (int64_t j = 0; j < cols; ++j) ss += xr[j] * xr[j];
        const float scale = 1.0f / std::sqrt(ss / static_cast<float>(cols) + e);
        #pragma omp simd
        for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] * scale * w[j];
    }
}
"""

BINDINGS = r"""
#include <Python.h>
#include <cstdint>

static PyObject* kg_bind_rmsnorm(PyObject*, PyObject* kg_args) {
    unsigned long long x, w, y;
    long long rows, cols;
    double eps;
    if (!PyArg_ParseTuple(kg_args, "KKKLLd", &x, &w, &y, &rows, &cols, &eps)) return nullptr;
    rmsnorm(reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(w), reinterpret_cast<float*>(y), rows, cols, eps);
    Py_RETURN_NONE;
}
static PyMethodDef kg_methods[] = {
    {"rmsnorm", kg_bind_rmsnorm, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};
static PyModuleDef kg_module = {PyModuleDef_HEAD_INIT, "rmsnorm", nullptr, -1,
    kg_methods};
PyMODINIT_FUNC PyInit_rmsnorm() { return PyModule_Create(&kg_module); }
"""

_lib = load_inline(
    "rmsnorm",
    cpp_sources=[SOURCE, BINDINGS],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    no_implicit_headers=True,
)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))  # same draw as Model
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        cols = x.shape[-1]
        y = torch.empty_like(x)
        w = self.weight.contiguous()  # a variable: it must outlive the call that reads it
        rows = x.numel() // cols
        _lib.rmsnorm(x.data_ptr(), w.data_ptr(), y.data_ptr(), rows, cols, float(self.eps))
        return y
