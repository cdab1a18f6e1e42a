"""log of small integers in [-1, 2]: NaN for -1, -Inf for 0, finite elsewhere."""

import torch
import torch.nn as nn

N = 1024


class Model(nn.Module):
    def forward(self, x):
        return torch.log(x)


def get_inputs():
    return [torch.randint(-1, 3, (N,)).float()]


def get_init_inputs():
    return []
