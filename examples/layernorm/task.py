"""LayerNorm over the last dimension of a (BATCH, SEQ, HIDDEN) tensor, with affine parameters.

The weight and bias are drawn at random (instead of nn.LayerNorm's ones and zeros) so that the
affine step is actually checked.
"""

import torch
import torch.nn as nn

BATCH = 32
SEQ = 512
HIDDEN = 1024
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(hidden))
            self.norm.bias.copy_(0.1 * torch.randn(hidden))

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    # A non-zero mean makes a one-pass E[x^2] - E[x]^2 variance lose precision; two passes don't.
    return [torch.randn(BATCH, SEQ, HIDDEN) * 2.0 + 3.0]


def get_init_inputs():
    return [HIDDEN, EPS]
