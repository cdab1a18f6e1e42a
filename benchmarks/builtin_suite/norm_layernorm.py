"""LayerNorm (nn.LayerNorm with affine) over the last dim of a (BATCH, SEQ, HIDDEN) tensor.

The weight and bias are random (not nn.LayerNorm's ones and zeros) so that the affine step counts.
"""

import torch
import torch.nn as nn

BATCH = 16
SEQ = 1024
HIDDEN = 4096
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.2 * torch.randn(hidden))
            self.norm.bias.copy_(0.2 * torch.randn(hidden))

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    # An offset mean: a one-pass E[x^2] - E[x]^2 variance loses precision on it.
    return [torch.randn(BATCH, SEQ, HIDDEN) * 2.0 + 4.0]


def get_init_inputs():
    return [HIDDEN, EPS]
