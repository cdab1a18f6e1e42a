"""Pointwise: y = hardtanh(leaky_relu(x, NEGATIVE_SLOPE), LOW, HIGH) on a square matrix."""

import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 8192
COLS = 8192
NEGATIVE_SLOPE = 0.05
LOW = -0.1
HIGH = 1.5


class Model(nn.Module):
    def __init__(self, negative_slope, low, high):
        super().__init__()
        self.negative_slope = negative_slope
        self.low = low
        self.high = high

    def forward(self, x):
        y = F.leaky_relu(x, self.negative_slope)
        return F.hardtanh(y, self.low, self.high)


def get_inputs():
    # Scaled so that both clipping bounds and the negative slope are all exercised.
    return [torch.randn(ROWS, COLS) * 3.0]


def get_init_inputs():
    return [NEGATIVE_SLOPE, LOW, HIGH]
