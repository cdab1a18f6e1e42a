import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.nn.functional.gelu(x)


batch_size = 4096
dim = 393216


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
