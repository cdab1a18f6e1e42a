"""Correct C++ kernel for tasks/tiny.py: y = x * 1e-6."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void scale(const float* x, float* y, int64_t n, double factor) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * static_cast<float>(factor);
}
"""

_lib = build_library(SOURCE, name="scale_by")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale(x, y, x.numel(), 1e-6)
        return y
