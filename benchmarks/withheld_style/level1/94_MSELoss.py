import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


batch_size = 32768
input_shape = (32768,)


def get_inputs():
    from torch.distributions import Pareto

    dist = Pareto(0.01, 1.5)
    return [dist.sample((batch_size, *input_shape)), dist.sample((batch_size, *input_shape))]


def get_init_inputs():
    return []
