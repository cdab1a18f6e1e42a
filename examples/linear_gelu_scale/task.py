"""Linear layer with a fused epilogue: y = GELU(x @ W^T + b) * SCALE, GELU in its exact erf form.

x is (BATCH, IN_FEATURES); W is (OUT_FEATURES, IN_FEATURES) as nn.Linear stores it.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4096
IN_FEATURES = 4096
OUT_FEATURES = 4096
SCALE = 0.5


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return F.gelu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALE]
