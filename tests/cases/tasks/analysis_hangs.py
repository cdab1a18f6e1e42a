"""A reference whose forward never returns."""

import torch
import torch.nn as nn

N = 16


class Model(nn.Module):
    def forward(self, x):
        while True:
            pass


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
