import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.log_softmax(x, dim=self.dim)


batch_size = 4096
dim = 393216


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [1]
