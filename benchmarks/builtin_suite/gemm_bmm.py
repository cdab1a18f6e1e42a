"""Batched matrix product: C[b] = A[b] @ B[b] with torch.bmm, A (BATCH, M, K) and B (BATCH, K, N)."""

import torch
import torch.nn as nn

BATCH = 32
M = 1024
N = 1024
K = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
