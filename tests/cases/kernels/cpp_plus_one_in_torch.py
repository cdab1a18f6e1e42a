"""Evades the static check: the kernel computes x * 2 and `+ 1` is left to PyTorch (aten.add)."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void scale(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f;
}
"""

_lib = build_library(SOURCE, name="scale")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale(x, y, x.numel())
        return y + 1
