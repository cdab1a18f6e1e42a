"""RMSNorm written out: y = x * rsqrt(mean(x^2, dim=-1, keepdim=True) + EPS) * weight."""

import torch
import torch.nn as nn

BATCH = 16
SEQ = 2048
HIDDEN = 2048
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        rms = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN) * 3.0]


def get_init_inputs():
    return [HIDDEN, EPS]
