"""For tasks/identity.py: returns an expanded view of the input; no kernel runs at all."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.expand(x.shape[0], x.shape[1])
