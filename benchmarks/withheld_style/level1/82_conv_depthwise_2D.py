import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, kernel_size):
        super().__init__()
        self.conv2d = nn.Conv2d(
            in_channels, in_channels, kernel_size, groups=in_channels, bias=False
        )

    def forward(self, x):
        return self.conv2d(x)


batch_size = 16
in_channels = 64
kernel_size = 3
height = 512
width = 512


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, kernel_size]
