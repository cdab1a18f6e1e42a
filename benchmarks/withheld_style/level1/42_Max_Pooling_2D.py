import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding, dilation):
        super().__init__()
        self.maxpool = nn.MaxPool2d(
            kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation
        )

    def forward(self, x):
        return self.maxpool(x)


batch_size = 32
channels = 64
height = 512
width = 512
kernel_size = 4
stride = 1
padding = 1
dilation = 1


def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
