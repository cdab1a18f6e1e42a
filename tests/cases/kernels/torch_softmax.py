"""Calls torch.softmax in forward instead of a kernel."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1) * 0 + x * 2 + 1
