"""Inputs drawn the way KernelBench's losses draw them: from a torch distribution, which checks
its arguments' values, and (READ_VALUE = 1) scaled by a value read back with `.item()`. Meta
tensors have no values: the analysis must still trace it at sizes too large for the CPU."""

import torch
import torch.nn as nn
from torch.distributions import Pareto

N = 256
READ_VALUE = 0


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


def get_inputs():
    dist = Pareto(torch.tensor(0.01), torch.tensor(1.5))
    scale = torch.rand(()).item() if READ_VALUE else 1.0
    return [dist.sample((N,)) * scale, dist.sample((N,))]


def get_init_inputs():
    return []
