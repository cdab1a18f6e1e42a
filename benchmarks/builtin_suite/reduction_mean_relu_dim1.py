"""Reduction over the middle (strided) dim with a prologue: y[b, n] = mean over r of relu(x[b, r, n])."""

import torch
import torch.nn as nn

BATCH = 64
REDUCE = 1024
COLS = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(torch.relu(x), dim=1)


def get_inputs():
    return [torch.randn(BATCH, REDUCE, COLS)]


def get_init_inputs():
    return []
