"""The mean of rows already centred on their mean: zero up to fp32 rounding (about 1e-8), so the
reference's values are noise, not signal (like a mean after a norm in KernelBench level 2)."""

import torch
import torch.nn as nn

ROWS, COLS = 64, 512


class Model(nn.Module):
    def forward(self, x):
        return (x - x.mean(dim=1, keepdim=True)).mean(dim=1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
