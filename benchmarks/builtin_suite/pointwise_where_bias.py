"""Pointwise select: y = where(x + b > t, x + b - t, (x + t) * HALF_SLOPE), b a bias over the last dim.

x and t are (BATCH, SEQ, HIDDEN); b is (HIDDEN,) and broadcasts over the leading dims.
"""

import torch
import torch.nn as nn

BATCH = 16
SEQ = 2048
HIDDEN = 1024
HALF_SLOPE = 0.5


class Model(nn.Module):
    def __init__(self, hidden, half_slope):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(hidden) * 0.3)
        self.half_slope = half_slope

    def forward(self, x, t):
        shifted = x + self.bias
        return torch.where(shifted > t, shifted - t, (x + t) * self.half_slope)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN), torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, HALF_SLOPE]
