"""Batched fp32 matrix product C[b] = A[b] @ B[b] (the prompts' worked examples)."""

import torch
import torch.nn as nn

BATCH = 3
M = 70
N = 90
K = 50


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
