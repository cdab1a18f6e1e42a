"""SwiGLU gate: silu(a) * b for two (ROWS, COLS) tensors (the prompts' worked examples)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 37
COLS = 300


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return F.silu(a) * b


def get_inputs():
    return [torch.randn(ROWS, COLS) * 4.0, torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
