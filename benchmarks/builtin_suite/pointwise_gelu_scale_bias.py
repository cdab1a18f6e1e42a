"""Pointwise: y = GELU(x) * SCALE + bias[c], exact (erf) GELU, one bias per channel of NCHW x."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
CHANNELS = 64
HEIGHT = 256
WIDTH = 256
SCALE = 1.7


class Model(nn.Module):
    def __init__(self, channels, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.5)
        self.scale = scale

    def forward(self, x):
        return F.gelu(x) * self.scale + self.bias


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, SCALE]
