"""Pointwise chain: y = clamp(x * sigmoid(x) * SCALE + bias[c], CLAMP_MIN, CLAMP_MAX).

x is (BATCH, CHANNELS, HEIGHT, WIDTH); bias holds one value per channel.
"""

import torch
import torch.nn as nn

BATCH = 64
CHANNELS = 64
HEIGHT = 64
WIDTH = 64
SCALE = 1.5
CLAMP_MIN = -0.5
CLAMP_MAX = 2.0


class Model(nn.Module):
    def __init__(self, channels, scale, clamp_min, clamp_max):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = x * torch.sigmoid(x) * self.scale + self.bias
        return torch.clamp(y, self.clamp_min, self.clamp_max)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, SCALE, CLAMP_MIN, CLAMP_MAX]
