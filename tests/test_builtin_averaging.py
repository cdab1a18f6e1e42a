"""Convolutions whose rounding error is averaged away downstream (tools/builtin/averaging.py)
start at one TF32 product; every other narrow convolution starts at tf32x3."""

from __future__ import annotations

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.builtin.conv import ConvKernel

CONV = "self.conv = nn.Conv2d(8, 16, 3)"  # 8 input channels: cuDNN runs it in exact fp32
X = "torch.randn(2, 8, 66, 66)"  # 64 x 64 outputs a channel, 32 x 32 after a pool


@pytest.mark.parametrize(
    ("forward", "averaged"),
    [
        ("F.adaptive_avg_pool2d(self.conv(x), 1)", True),
        ("self.conv(x).mean(dim=(2, 3))", True),
        ("F.max_pool2d(self.conv(x) / 2, 2).mean(dim=(2, 3)).sum(dim=1)", True),
        ("F.gelu(self.conv(x)).flatten(2).mean(dim=-1)", True),
        ("torch.sigmoid(F.avg_pool2d(self.conv(x), 2)).sum()", True),
        ("self.conv(x)", False),
        ("self.conv(x).sum(dim=1)", False),  # 16 elements a sum: too few to average
        ("F.avg_pool2d(self.conv(x), 8).mean(dim=(2, 3))", False),  # 64 a mean: still too few
        ("F.group_norm(self.conv(x), 4).mean(dim=(2, 3))", False),  # normalised first
        ("self.conv(x).amax(dim=(2, 3))", False),  # a max keeps one element's error
        ("((c := self.conv(x)).mean(dim=(2, 3)), c)", False),  # also returned as it is
    ],
)
def test_convolutions_averaged_downstream_start_at_one_tf32_product(tmp_path, forward, averaged):
    task = task_file(tmp_path, forward, X, params=CONV)
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    [conv] = [k for k in generator.program.kernels if isinstance(k, ConvKernel)]
    assert conv.averaged is averaged
    first = generator.default_config()[conv.name]["DOT"]
    assert first == ("tf32rna" if averaged else "tf32x3")
    assert "tf32x3" in generator.tunables()[conv.name]["DOT"]  # the fallback stays in reach
