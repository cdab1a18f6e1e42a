"""A depthwise convolution feeding a 1x1 convolution, written as one kernel
(tools/builtin/conv_chain.py, tools/builtin/triton_conv_chain.py), verified by the real harness
on the Triton interpreter; and the chains that must stay two kernels."""

from __future__ import annotations

import re

import pytest
from builtin_helpers import builtin_generator, task_file
from test_builtin import generate, verify

from kernelgraph.tools.builtin.conv import ConvKernel

DW2 = "self.d = nn.Conv2d(8, 8, {}, groups=8, bias=False); self.p = nn.Conv2d(8, {}, 1{})"
FUSED = {
    "2d_padded": ("self.p(self.d(x))", "torch.randn(2, 8, 6, 7)",
                  DW2.format("3, padding=1", 12, ", bias=False")),
    "2d_strided_dilated_bias_relu": ("torch.relu(self.p(self.d(x)))", "torch.randn(1, 8, 11, 9)",
                                     DW2.format("3, stride=2, padding=2, dilation=2", 16, "")),
    "2d_3x5_tall_batch": ("self.p(self.d(x)) * 2", "torch.randn(3, 8, 7, 5)",
                          DW2.format("(3, 5), padding=(0, 2)", 8, "")),
    "1d": ("self.p(self.d(x))", "torch.randn(2, 8, 19)",
           "self.d = nn.Conv1d(8, 8, 5, padding=2, groups=8, bias=False); "
           "self.p = nn.Conv1d(8, 12, 1)"),
    "3d": ("self.p(self.d(x))", "torch.randn(1, 8, 4, 5, 6)",
           "self.d = nn.Conv3d(8, 8, (2, 3, 3), padding=(0, 1, 1), groups=8, bias=False); "
           "self.p = nn.Conv3d(8, 8, 1, bias=False)"),
}  # fmt: skip


def _conv_kernels(task, tmp_path) -> list[ConvKernel]:
    generator = builtin_generator(task, "triton", tmp_path)
    return [k for k in generator.program.kernels if isinstance(k, ConvKernel)]


@pytest.mark.parametrize("name", list(FUSED))
def test_a_depthwise_separable_convolution_is_one_kernel_and_verifies(tmp_path, name):
    forward, inputs, params = FUSED[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    [kernel] = _conv_kernels(task, tmp_path)
    assert kernel.depthwise_input is not None
    file = generate(task, tmp_path)
    source = file.read_text()
    taps = kernel.depthwise_input.kernel_numel
    # every tap an FMA into the A tile after the first product, then the 1x1 product
    assert source.count("a = tl.fma(v, w[None, :], a)") == taps - 1
    assert source.count("a = v * w[None, :]") == 1
    verdict = verify(task, file, tmp_path)
    assert verdict.passed, verdict.message


UNFUSED = {
    # the depthwise bias (an epilogue) would run on every K step of the 1x1 convolution
    "depthwise_bias": ("self.p(self.d(x))",
                       "self.d = nn.Conv2d(8, 8, 3, groups=8); self.p = nn.Conv2d(8, 8, 1)"),
    "activation_between": ("self.p(torch.relu(self.d(x)))", DW2.format(3, 8, "")),
    "depthwise_output_returned": ("(lambda y: (y, self.p(y)))(self.d(x))", DW2.format(3, 8, "")),
    "strided_pointwise": ("self.p(self.d(x))",
                          "self.d = nn.Conv2d(8, 8, 3, groups=8, bias=False); "
                          "self.p = nn.Conv2d(8, 8, 1, stride=2)"),
    "grouped_pointwise": ("self.p(self.d(x))",
                          "self.d = nn.Conv2d(8, 8, 3, groups=8, bias=False); "
                          "self.p = nn.Conv2d(8, 16, 1, groups=2)"),
    "window_pointwise": ("self.p(self.d(x))", DW2.format(3, 8, "").replace(", 1)", ", 3)")),
}  # fmt: skip


@pytest.mark.parametrize("name", list(UNFUSED))
def test_chains_the_fusion_does_not_cover_stay_two_kernels(tmp_path, name):
    forward, params = UNFUSED[name]
    task = task_file(tmp_path, forward, "torch.randn(1, 8, 6, 7)", params=params)
    kernels = _conv_kernels(task, tmp_path)
    assert len(kernels) == 2
    assert all(k.depthwise_input is None for k in kernels)


def test_an_unfused_chain_still_verifies(tmp_path):
    forward, params = UNFUSED["depthwise_bias"]
    task = task_file(tmp_path, forward, "torch.randn(1, 8, 6, 7)", params=params)
    verdict = verify(task, generate(task, tmp_path), tmp_path)
    assert verdict.passed, verdict.message


def test_a_fused_kernel_that_drops_a_tap_fails(tmp_path):
    """The harness catches an A tile missing one kernel position's term."""
    forward, inputs, params = FUSED["2d_padded"]
    task = task_file(tmp_path, forward, inputs, params=params)
    source = generate(task, tmp_path).read_text()
    lines = source.splitlines()
    last_fma = max(i for i, line in enumerate(lines) if "a = tl.fma(v, w[None, :], a)" in line)
    indent = re.match(r"\s*", lines[last_fma]).group(0)
    lines[last_fma] = f"{indent}a = a + 0.0"
    broken = tmp_path / "broken.py"
    broken.write_text("\n".join(lines) + "\n")
    verdict = verify(task, broken, tmp_path)
    assert verdict.status == "incorrect", verdict.message
