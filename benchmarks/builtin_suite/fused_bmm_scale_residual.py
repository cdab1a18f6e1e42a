"""Batched matrix product with an epilogue: y = bmm(A, B) * SCALE + R, R a residual (BATCH, M, N)."""

import torch
import torch.nn as nn

BATCH = 16
M = 1024
N = 1024
K = 2048
SCALE = 0.03125


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b, r):
        return torch.bmm(a, b) * self.scale + r


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N), torch.randn(BATCH, M, N)]


def get_init_inputs():
    return [SCALE]
