"""3x3 convolution without padding (the output is 2 smaller each side) followed by exact GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
IN_CHANNELS = 32
OUT_CHANNELS = 64
HEIGHT = 130
WIDTH = 130


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3)

    def forward(self, x):
        return F.gelu(self.conv(x))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
