"""A task far too big to run (a 2**17 x 2**17 fp32 input: 2**34 elements, 64 GiB) that the
analysis must still describe, from shapes alone on meta tensors."""

import torch
import torch.nn as nn

ROWS = 2**17
COLS = 2**17
OUT = 16


class Model(nn.Module):
    def __init__(self, cols, out):
        super().__init__()
        self.linear = nn.Linear(cols, out)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [COLS, OUT]
