import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, A, B):
        return torch.matmul(A, B.T)


M = 1024 * 2
K = 4096 * 2
N = 2048 * 2


def get_inputs():
    return [torch.rand(M, K), torch.rand(N, K)]


def get_init_inputs():
    return []
