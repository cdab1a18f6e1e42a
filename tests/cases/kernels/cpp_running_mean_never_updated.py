"""Wrong for tasks/running_mean.py: right outputs, but the running-mean buffer is never updated."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void scale_add(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f + 1.0f;
}
"""

_lib = build_library(SOURCE, name="scale_add_untracked")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(256))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale_add(x, y, x.numel())
        return y
