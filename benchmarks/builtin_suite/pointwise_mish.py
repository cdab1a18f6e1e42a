"""Pointwise: Mish, y = x * tanh(softplus(x)), on a (BATCH, FEATURES) activation."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16384
FEATURES = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.mish(x)


def get_inputs():
    # Wide range: softplus must not overflow for large x nor lose the tail for very negative x.
    return [torch.randn(BATCH, FEATURES) * 8.0]


def get_init_inputs():
    return []
