"""Far too big for any machine: 100 billion floats (400 GB) per tensor."""

import torch
import torch.nn as nn

N = 100_000_000_000


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
