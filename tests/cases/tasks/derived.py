"""Size constants, one derived from another (M follows N) and one a tuple."""

import torch
import torch.nn as nn

N = 64
M = N * 2
SHAPE = (4, 8)


class Model(nn.Module):
    def forward(self, a, b):
        return a * 2, b + 1


def get_inputs():
    return [torch.randn(M), torch.randn(*SHAPE)]


def get_init_inputs():
    return []
