"""A reference that draws random numbers in forward: two identical calls differ."""

import torch
import torch.nn as nn

N = 64


class Model(nn.Module):
    def forward(self, x):
        return x + torch.rand(N)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
