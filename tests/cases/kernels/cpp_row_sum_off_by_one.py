"""Off-by-one row sum for tasks/row_sum.py: the loop bound skips each row's last column."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float acc = 0.0f;
        for (int64_t c = 0; c < cols - 1; ++c) acc += x[r * cols + c];
        y[r] = acc;
    }
}
"""

_lib = build_library(SOURCE, name="row_sum_off_by_one")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, dtype=x.dtype)
        _lib.row_sum(x, y, rows, cols)
        return y
