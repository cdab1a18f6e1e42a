"""Correct C++ kernel for tasks/scale_add.py whose calls take two very different times: two
calls in three wait 5 ms, as a kernel does when another process holds the cores. Its honest
median sits in the slow mode, so median x calls overstates the timed loop."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>
#include <time.h>

static int64_t calls = 0;

extern "C" void scale_add_bimodal(const float* x, float* y, int64_t n) {
    if (calls++ % 3 != 0) {
        struct timespec wait = {0, 5000000};
        nanosleep(&wait, nullptr);
    }
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f + 1.0f;
}
"""

_lib = build_library(SOURCE, name="scale_add_bimodal")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale_add_bimodal(x, y, x.numel())
        return y
