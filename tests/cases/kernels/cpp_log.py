"""Correct log for tasks/log_nan_inf.py: NaN and -Inf where the reference has them."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cmath>
#include <cstdint>

extern "C" void log_all(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
}
"""

_lib = build_library(SOURCE, name="log_all")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.log_all(x, y, x.numel())
        return y
