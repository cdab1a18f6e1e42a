"""A task that fails to import: a size constant refers to a name that does not exist."""

import torch
import torch.nn as nn

N = BASE_SIZE * 2  # noqa: F821 - the point of this case


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
