"""A size constant written as an expression (2**20), as many tasks write them."""

import torch
import torch.nn as nn

N = 2**20


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
