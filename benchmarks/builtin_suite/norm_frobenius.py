"""Frobenius normalisation: y = x / ||x||_F, one norm over the whole (BATCH, CHANNELS, H, W) tensor."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
HEIGHT = 256
WIDTH = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / torch.norm(x, p="fro")


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
