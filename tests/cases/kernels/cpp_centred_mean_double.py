"""An honest kernel for tasks/centred_mean.py that sums in double: its answer is a different
rounding noise from the reference's, both far inside atol of the exact answer, zero."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void centred_mean(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = x + r * cols;
        double mean = 0.0, centred = 0.0;
        for (int64_t c = 0; c < cols; ++c) mean += row[c];
        mean /= cols;
        for (int64_t c = 0; c < cols; ++c) centred += row[c] - mean;
        y[r] = (float)(centred / cols);
    }
}
"""

_lib = build_library(SOURCE, name="centred_mean")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
        _lib.centred_mean(x, y, x.shape[0], x.shape[1])
        return y
