import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, A, B):
        return torch.bmm(A, B)


batch_size = 128
m = 128 * 4
k = 256 * 4
n = 512 * 4


def get_inputs():
    return [torch.rand(batch_size, m, k), torch.rand(batch_size, k, n)]


def get_init_inputs():
    return []
