"""Reduction over many short rows: y[i] = product over j of x[i, j], with values near 1."""

import torch
import torch.nn as nn

ROWS = 1048576
COLS = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.prod(x, dim=-1)


def get_inputs():
    # Factors close to 1 keep the products in a range where fp32 is accurate.
    return [1.0 + 0.05 * torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
