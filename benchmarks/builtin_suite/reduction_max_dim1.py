"""Reduction: maximum over the middle (strided) dim, y[b, n] = max over r of x[b, r, n]."""

import torch
import torch.nn as nn

BATCH = 32
REDUCE = 2048
COLS = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.amax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, REDUCE, COLS)]


def get_init_inputs():
    return []
