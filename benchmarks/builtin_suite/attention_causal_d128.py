"""Causal attention (is_causal=True) at head dim 128, fp32 inputs made on the GPU: the flash kernel
skips the key blocks past the diagonal. GPU only (get_inputs makes CUDA tensors)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    return [torch.randn(8, 16, 2048, 128, device="cuda") for _ in range(3)]


def get_init_inputs():
    return []
