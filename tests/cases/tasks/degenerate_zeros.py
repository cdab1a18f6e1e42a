"""A degenerate task: the reference output is all zeros whatever the input."""

import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def forward(self, x):
        return x * 0


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
