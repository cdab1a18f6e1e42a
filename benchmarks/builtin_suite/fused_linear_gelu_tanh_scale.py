"""Linear layer with an epilogue: y = GELU(x @ W^T + b) * SCALE, GELU in its tanh approximation."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8192
IN_FEATURES = 2048
OUT_FEATURES = 4096
SCALE = 2.0


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return F.gelu(self.linear(x), approximate="tanh") * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALE]
