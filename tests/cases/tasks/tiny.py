"""Outputs far below the fp32 tolerance (atol 1e-4): an all-zero answer is within it."""

import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def forward(self, x):
        return x * 1e-6


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
