"""Log-sum-exp of each row: y[i] = log(sum over j of exp(x[i, j])), computed without overflow."""

import torch
import torch.nn as nn

ROWS = 16384
COLS = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.logsumexp(x, dim=-1)


def get_inputs():
    # Values up to ~500: exp() overflows fp32 unless the row maximum is taken out first.
    return [torch.randn(ROWS, COLS) * 100.0]


def get_init_inputs():
    return []
