"""Square matrix product C = A @ B in fp32, A (M, K) and B (K, N), all 4096."""

import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
