"""Index reduction over the middle (strided) dim: y[b, n] = argmax over r of x[b, r, n] (int64)."""

import torch
import torch.nn as nn

BATCH = 16
REDUCE = 4096
COLS = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, REDUCE, COLS)]


def get_init_inputs():
    return []
