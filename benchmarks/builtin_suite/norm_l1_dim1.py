"""L1 normalisation over the channel (strided) dim: y = x / sum(|x|, dim=1), x (BATCH, CHANNELS, LENGTH)."""

import torch
import torch.nn as nn

BATCH = 64
CHANNELS = 64
LENGTH = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / torch.sum(torch.abs(x), dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs():
    return []
