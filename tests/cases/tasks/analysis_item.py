"""A forward that reads a value back (`.item()`), which meta tensors cannot do: the analysis
traces it with real tensors on the CPU when it is small, and says why not when it is not."""

import torch
import torch.nn as nn

N = 256


class Model(nn.Module):
    def forward(self, x):
        scale = x.abs().amax().item()
        return x / scale


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
