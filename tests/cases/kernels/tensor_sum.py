"""For tasks/row_sum.py: the tensor method x.sum() does the work."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.sum(dim=1)
