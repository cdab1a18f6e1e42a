"""C++ (OpenMP): direct 3x3 convolution (stride 1, padding 1) + bias + ReLU, NCHW.

One task computes one output row (n, oh) for a block of CO_BLOCK output channels, VW columns at
a time: a CO_BLOCK x VW tile of outputs stays in vector registers while the loop runs over
input channels and the 9 taps, so each loaded vector of input feeds CO_BLOCK FMAs and nothing
is written until the tile is done. Padding: input rows outside the image are skipped, and
input columns outside it load as zeros.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#if defined(__AVX512F__)
// GCC defaults to 256-bit vectors even where 512-bit ones exist; this loop wants the wide ones.
#pragma GCC target("prefer-vector-width=512")
#endif
#include <algorithm>
#include <cstdint>

constexpr int64_t CO_BLOCK = 8;  // output channels per task
constexpr int64_t VW = 16;       // output columns per register tile (one 512-bit vector)

extern "C" void conv3x3_relu(const float* x, const float* w, const float* bias, float* y,
                             int64_t B, int64_t C_in, int64_t C_out, int64_t H, int64_t W) {
    const int64_t co_blocks = (C_out + CO_BLOCK - 1) / CO_BLOCK;
    #pragma omp parallel for collapse(3) schedule(static)
    for (int64_t n = 0; n < B; ++n) {
        for (int64_t cb = 0; cb < co_blocks; ++cb) {
            for (int64_t oh = 0; oh < H; ++oh) {
                const int64_t co0 = cb * CO_BLOCK;
                const int64_t nco = std::min(CO_BLOCK, C_out - co0);
                // Spare channels of a partial block reuse channel co0; they are never stored.
                const float* wc[CO_BLOCK];
                for (int64_t c = 0; c < CO_BLOCK; ++c) wc[c] = w + (co0 + (c < nco ? c : 0)) * C_in * 9;

                for (int64_t ow0 = 0; ow0 < W; ow0 += VW) {
                    // CO_BLOCK x VW outputs live in registers for the whole ci / kh / kw loop.
                    float acc[CO_BLOCK][VW];
                    for (int64_t c = 0; c < CO_BLOCK; ++c)
                        for (int64_t v = 0; v < VW; ++v) acc[c][v] = bias[co0 + (c < nco ? c : 0)];

                    for (int64_t ci = 0; ci < C_in; ++ci) {
                        for (int64_t kh = 0; kh < 3; ++kh) {
                            const int64_t ih = oh + kh - 1;
                            if (ih < 0 || ih >= H) continue;  // zero padding above / below
                            const float* xr = x + ((n * C_in + ci) * H + ih) * W;
                            for (int64_t kw = 0; kw < 3; ++kw) {
                                // Input columns ow + kw - 1; outside the image they read as 0.
                                float xv[VW];
                                #pragma omp simd
                                for (int64_t v = 0; v < VW; ++v) {
                                    const int64_t iw = ow0 + v + kw - 1;
                                    xv[v] = (iw >= 0 && iw < W) ? xr[iw] : 0.0f;
                                }
                                const int64_t tap = (ci * 3 + kh) * 3 + kw;
                                #pragma GCC unroll 8
                                for (int64_t c = 0; c < CO_BLOCK; ++c) {
                                    const float wv = wc[c][tap];
                                    #pragma omp simd
                                    for (int64_t v = 0; v < VW; ++v) acc[c][v] += wv * xv[v];
                                }
                            }
                        }
                    }

                    const int64_t nw = std::min(VW, W - ow0);
                    for (int64_t c = 0; c < nco; ++c) {
                        float* out = y + ((n * C_out + co0 + c) * H + oh) * W + ow0;
                        for (int64_t v = 0; v < nw; ++v) out[v] = acc[c][v] > 0.0f ? acc[c][v] : 0.0f;
                    }
                }
            }
        }
    }
}
"""

BINDINGS = r"""
#include <Python.h>
#include <cstdint>

static PyObject* kg_bind_conv3x3_relu(PyObject*, PyObject* kg_args) {
    unsigned long long x, w, bias, y;
    long long B, C_in, C_out, H, W;
    if (!PyArg_ParseTuple(kg_args, "KKKKLLLLL", &x, &w, &bias, &y, &B, &C_in, &C_out, &H, &W)) return nullptr;
    conv3x3_relu(reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(w), reinterpret_cast<const float*>(bias), reinterpret_cast<float*>(y), B, C_in, C_out, H, W);
    Py_RETURN_NONE;
}
static PyMethodDef kg_methods[] = {
    {"conv3x3_relu", kg_bind_conv3x3_relu, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};
static PyModuleDef kg_module = {PyModuleDef_HEAD_INIT, "example_conv3x3_relu", nullptr, -1,
    kg_methods};
PyMODINIT_FUNC PyInit_example_conv3x3_relu() { return PyModule_Create(&kg_module); }
"""

# Built by torch into TORCH_EXTENSIONS_DIR/<name>, cached by source; without torch's headers
# (no_implicit_headers) and with Python C API bindings a cold build takes well under a second.
_lib = load_inline(
    "example_conv3x3_relu",
    cpp_sources=[SOURCE, BINDINGS],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    no_implicit_headers=True,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        # Same module as Model, so the seeded weight and bias match; it is never called.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)

    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight.contiguous()
        B, C_in, H, W = x.shape
        C_out = w.shape[0]
        y = torch.empty((B, C_out, H, W), dtype=torch.float32, device=x.device)
        bias = self.conv.bias
        _lib.conv3x3_relu(
            x.data_ptr(), w.data_ptr(), bias.data_ptr(), y.data_ptr(), B, C_in, C_out, H, W
        )
        return y
