"""For tasks/identity.py: the right answer without any kernel, by allocating and copying."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        y.copy_(x)
        return y
