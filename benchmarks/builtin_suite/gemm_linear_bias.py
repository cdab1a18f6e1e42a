"""Linear layer y = x @ W^T + b (nn.Linear with bias), x (BATCH, IN_FEATURES)."""

import torch
import torch.nn as nn

BATCH = 8192
IN_FEATURES = 4096
OUT_FEATURES = 4096


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
