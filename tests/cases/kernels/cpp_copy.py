"""Correct C++ kernel for tasks/identity.py: copies x into a fresh tensor."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void copy(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}
"""

_lib = build_library(SOURCE, name="copy")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.copy(x, y, x.numel())
        return y
