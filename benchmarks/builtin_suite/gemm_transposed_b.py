"""Matrix product with a transposed second operand: C = X @ W^T, X (M, K) and W (N, K)."""

import torch
import torch.nn as nn

M = 8192
N = 4096
K = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return x @ w.t()


def get_inputs():
    return [torch.randn(M, K), torch.randn(N, K)]


def get_init_inputs():
    return []
