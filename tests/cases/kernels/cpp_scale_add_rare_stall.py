"""C++ kernel for tasks/scale_add.py whose median hides its cost: two calls in five stall
30 ms, so the median (a fast call) accounts for a small part of the timed loop."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>
#include <time.h>

static int64_t calls = 0;

extern "C" void scale_add_rare_stall(const float* x, float* y, int64_t n) {
    if (calls++ % 5 < 2) {
        struct timespec wait = {0, 30000000};
        nanosleep(&wait, nullptr);
    }
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f + 1.0f;
}
"""

_lib = build_library(SOURCE, name="scale_add_rare_stall")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale_add_rare_stall(x, y, x.numel())
        return y
