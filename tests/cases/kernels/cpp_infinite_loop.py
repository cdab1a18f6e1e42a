"""C++ kernel that never returns (a loop whose counter is never advanced): timeout."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void scale_add(const float* x, float* y, int64_t n) {
    volatile int64_t i = 0;
    while (i < n) y[i] = x[i] * 2.0f + 1.0f;  // i is never incremented
}
"""

_lib = build_library(SOURCE, name="scale_add_hangs")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale_add(x, y, x.numel())
        return y
