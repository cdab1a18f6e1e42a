"""Writes one zero per row: the exact answer of tasks/centred_mean.py, whose reference is noise."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void row_zeros(float* y, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) y[r] = 0.0f;
}
"""

_lib = build_library(SOURCE, name="row_zeros")


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
        _lib.row_zeros(y, y.numel())
        return y
