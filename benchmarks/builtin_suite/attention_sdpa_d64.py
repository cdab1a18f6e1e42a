"""Attention through F.scaled_dot_product_attention at a common head dim (64), fp32 inputs made on
the GPU: the builtin's one-pass flash kernel. GPU only (get_inputs makes CUDA tensors)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [torch.randn(16, 16, 1024, 64, device="cuda") for _ in range(3)]


def get_init_inputs():
    return []
