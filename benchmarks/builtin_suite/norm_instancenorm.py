"""InstanceNorm (nn.InstanceNorm2d, no affine): each (sample, channel) plane normalised on its own."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 64
HEIGHT = 128
WIDTH = 128
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, channels, eps):
        super().__init__()
        self.norm = nn.InstanceNorm2d(channels, eps=eps)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 3.0 - 2.0]


def get_init_inputs():
    return [CHANNELS, EPS]
