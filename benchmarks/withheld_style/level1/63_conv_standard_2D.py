import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size), bias=False)

    def forward(self, x):
        return self.conv2d(x)


batch_size = 16
in_channels = 16
out_channels = 128
kernel_size = 3
height = 1024
width = 1024


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
