"""3x3 convolution without bias, then a separate per-channel bias and tanh: y = tanh(conv(x) + b[c])."""

import torch
import torch.nn as nn

BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 64
HEIGHT = 128
WIDTH = 128


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.5)

    def forward(self, x):
        return torch.tanh(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
