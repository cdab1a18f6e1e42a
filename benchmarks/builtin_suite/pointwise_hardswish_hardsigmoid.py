"""Pointwise: y = hardswish(x) * hardsigmoid(x + bias[c]), bias per channel of NCHW x."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
CHANNELS = 128
HEIGHT = 128
WIDTH = 64


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        return F.hardswish(x) * F.hardsigmoid(x + self.bias)


def get_inputs():
    # Spread over [-9, 9] or so, so that both saturated ends of each hard curve are hit.
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 3.0]


def get_init_inputs():
    return [CHANNELS]
