"""Wrong answer for tasks/argmax_ties.py: the index of the row MINIMUM."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void argmin_rows(const float* x, int64_t* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        int64_t best = 0;
        for (int64_t c = 1; c < cols; ++c)
            if (x[r * cols + c] < x[r * cols + best]) best = c;
        out[r] = best;
    }
}
"""

_lib = build_library(SOURCE, name="argmin")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, dtype=torch.int64)
        _lib.argmin_rows(x, out, rows, cols)
        return out
