import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        self.avg_pool = nn.AvgPool3d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.avg_pool(x)


batch_size = 16
channels = 32
depth = 128
height = 128
width = 256
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    return [torch.rand(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]
