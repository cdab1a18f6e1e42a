"""Pointwise arithmetic: y = sqrt(|x| + 1) * rsqrt(x*x + EPS) + ALPHA * x**3, clamped to +-LIMIT."""

import torch
import torch.nn as nn

ROWS = 8192
COLS = 8192
EPS = 0.01
ALPHA = 0.25
LIMIT = 20.0


class Model(nn.Module):
    def __init__(self, eps, alpha, limit):
        super().__init__()
        self.eps = eps
        self.alpha = alpha
        self.limit = limit

    def forward(self, x):
        y = torch.sqrt(torch.abs(x) + 1.0) * torch.rsqrt(x * x + self.eps)
        y = y + self.alpha * torch.pow(x, 3)
        return torch.clamp(y, -self.limit, self.limit)


def get_inputs():
    return [torch.randn(ROWS, COLS) * 2.0]


def get_init_inputs():
    return [EPS, ALPHA, LIMIT]
