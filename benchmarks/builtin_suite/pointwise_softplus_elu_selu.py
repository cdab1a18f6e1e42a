"""Pointwise chain: y = selu(elu(softplus(x) - SHIFT, ALPHA)) on a flat (ROWS, COLS) tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 4096
COLS = 16384
SHIFT = 1.0
ALPHA = 0.8


class Model(nn.Module):
    def __init__(self, shift, alpha):
        super().__init__()
        self.shift = shift
        self.alpha = alpha

    def forward(self, x):
        y = F.softplus(x) - self.shift
        y = F.elu(y, self.alpha)
        return F.selu(y)


def get_inputs():
    return [torch.randn(ROWS, COLS) * 4.0]


def get_init_inputs():
    return [SHIFT, ALPHA]
