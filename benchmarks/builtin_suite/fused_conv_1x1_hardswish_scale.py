"""Pointwise (1x1) convolution, then y = hardswish(conv(x)) * SCALE, NCHW with many channels."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
IN_CHANNELS = 256
OUT_CHANNELS = 256
HEIGHT = 64
WIDTH = 64
SCALE = 0.5


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, scale):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)
        self.scale = scale

    def forward(self, x):
        return F.hardswish(self.conv(x)) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, SCALE]
