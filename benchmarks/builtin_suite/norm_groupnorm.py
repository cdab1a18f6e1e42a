"""GroupNorm (nn.GroupNorm, affine) of an NCHW tensor: GROUPS groups of CHANNELS / GROUPS channels."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 256
HEIGHT = 64
WIDTH = 64
GROUPS = 32
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, groups, channels, eps):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.2 * torch.randn(channels))
            self.norm.bias.copy_(0.2 * torch.randn(channels))

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 2.0 + 1.0]


def get_init_inputs():
    return [GROUPS, CHANNELS, EPS]
