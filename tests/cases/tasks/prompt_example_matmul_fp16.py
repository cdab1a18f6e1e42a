"""fp16 matrix product C = A @ B (the prompts' worked examples; evaluate with precision fp16)."""

import torch
import torch.nn as nn

M = 256
N = 192
K = 320


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def get_init_inputs():
    return []
