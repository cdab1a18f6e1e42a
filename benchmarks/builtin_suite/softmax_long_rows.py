"""Softmax over the last dim of long rows: (ROWS, COLS) with COLS = 32768, too long for one tile."""

import torch
import torch.nn as nn

ROWS = 2048
COLS = 32768


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS) * 4.0]


def get_init_inputs():
    return []
