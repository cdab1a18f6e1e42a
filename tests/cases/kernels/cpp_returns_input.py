"""For tasks/identity.py: a kernel runs (it only reads x), but the output returned is x itself."""

import torch
import torch.nn as nn

from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
#include <cstdint>

extern "C" void checksum(const float* x, float* out, int64_t n) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i) acc += x[i];
    out[0] = acc;
}
"""

_lib = build_library(SOURCE, name="checksum")


class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty(1)
        _lib.checksum(x, scratch, x.numel())
        return x
