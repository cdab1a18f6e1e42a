"""Tall-skinny matrix product: C = A @ B with many rows and few columns, A (M, K) and B (K, N)."""

import torch
import torch.nn as nn

M = 65536
N = 256
K = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
