"""3x3 convolution (stride 1, padding 1, bias) then ReLU, NCHW, IN_CHANNELS -> OUT_CHANNELS."""

import torch
import torch.nn as nn

BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 128
HEIGHT = 128
WIDTH = 128


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
