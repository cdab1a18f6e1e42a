"""Reduction along the middle dimension: y[b, n] = mean over r of x[b, r, n].

x is (BATCH, REDUCE, COLS); the reduced dimension is strided, the kept one contiguous.
"""

import torch
import torch.nn as nn

BATCH = 32
REDUCE = 1024
COLS = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, REDUCE, COLS)]


def get_init_inputs():
    return []
