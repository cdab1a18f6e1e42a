"""Matrix product with a long inner dim: C = A @ B, small (M, N) output and K = 65536 (split-K shape)."""

import torch
import torch.nn as nn

M = 512
N = 512
K = 65536


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    # B scaled by 1/sqrt(K), as an initialised layer is: outputs of order 1. With unit B the
    # outputs reach hundreds and two fp32 summation orders differ by more than atol near zero.
    return [torch.randn(M, K), torch.randn(K, N) * K**-0.5]


def get_init_inputs():
    return []
