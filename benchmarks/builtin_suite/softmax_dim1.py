"""Softmax over a non-last (strided) dim: x is (BATCH, CHANNELS, LENGTH), normalised over CHANNELS."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 512
LENGTH = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH) * 5.0]


def get_init_inputs():
    return []
