"""RMSNorm over the last dimension with a learned scale (the prompts' worked examples)."""

import torch
import torch.nn as nn

BATCH = 3
SEQ = 7
HIDDEN = 1000
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN) * 3.0]


def get_init_inputs():
    return [HIDDEN, EPS]
