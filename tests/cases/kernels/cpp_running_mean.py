"""Correct C++ kernel for tasks/running_mean.py: y = x * 2 + 1 and the running-mean update."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void scale_add_track(const float* x, float* y, float* running, int64_t rows,
                                int64_t cols) {
    for (int64_t i = 0; i < rows * cols; ++i) y[i] = x[i] * 2.0f + 1.0f;
    for (int64_t c = 0; c < cols; ++c) {
        float sum = 0.0f;
        for (int64_t r = 0; r < rows; ++r) sum += x[r * cols + c];
        running[c] = running[c] * 0.9f + 0.1f * (sum / rows);
    }
}
"""

_lib = build_library(SOURCE, name="scale_add_track")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(256))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale_add_track(x, y, self.running_mean, x.shape[0], x.shape[1])
        return y
