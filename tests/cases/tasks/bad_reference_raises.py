"""A reference whose forward raises: the shapes do not broadcast."""

import torch
import torch.nn as nn

N = 64


class Model(nn.Module):
    def forward(self, x):
        return x + torch.ones(N + 1)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
