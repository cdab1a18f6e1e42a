"""Matrix product with a bias and a SiLU epilogue: h = A @ B + bias[n], y = h * sigmoid(h)."""

import torch
import torch.nn as nn

M = 4096
N = 4096
K = 2048


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, a, b):
        h = torch.matmul(a, b) + self.bias
        return h * torch.sigmoid(h)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return [N]
