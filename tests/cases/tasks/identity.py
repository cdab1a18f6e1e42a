"""A copy of the input: the answer needs no compute, only a kernel that moves the data."""

import torch
import torch.nn as nn

ROWS = 64
COLS = 256


class Model(nn.Module):
    def forward(self, x):
        return x.clone()


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
