"""A depthwise convolution feeding a 1x1 convolution (a depthwise-separable convolution) as
one kernel: the 1x1 convolution's A tile is the depthwise output, computed from the input as
the tile is needed (tools/builtin/triton_conv_chain.py), so that output never goes through
memory. level1/86 ([16, 64, 512, 512] -> 128 channels) moved 5.4 GB in two kernels against
the 3.2 GB of its input and output.

`fuse_depthwise_pointwise(program)` merges two consecutive launches where:
- the first is a forward depthwise convolution swept by rows, with no epilogue (its bias or
  activation would run on every K step of the second), and at most FUSED_TAPS positions;
- the second is a forward 1x1 convolution (stride 1, no padding, one group) over exactly that
  output, reading it straight (no channels-last copy), with any epilogue of its own;
- nothing else reads the depthwise output.
"""

from __future__ import annotations

from dataclasses import replace

from kernelgraph.tools.builtin.averaging import reads
from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.expr import var
from kernelgraph.tools.builtin.program import Program, Step

FUSED_TAPS = 49  # the taps are unrolled in the K loop: up to a 7x7 window


def fuse_depthwise_pointwise(program: Program) -> Program:
    steps: list[Step] = []
    for index, step in enumerate(program.steps):
        if steps and _fusable(program, index - 1, steps[-1], step):
            steps[-1] = _fused(steps[-1], step)
        else:
            steps.append(step)
    return replace(program, steps=steps)


def _fusable(program: Program, index: int, first: Step, second: Step) -> bool:
    dw, pw = first.kernel, second.kernel
    if not (isinstance(dw, ConvKernel) and isinstance(pw, ConvKernel)):
        return False
    if not (_bare_depthwise(dw) and _pointwise(pw)) or len(first.outs) != 1:
        return False
    out = first.outs[0]
    x_slot = pw.inputs.index(pw.x)
    if second.inputs.count(out) != 1 or second.inputs[x_slot] != out:
        return False
    if out in program.outputs or dw.depthwise_input is not None:
        return False
    others = (s for i, s in enumerate(program.steps) if i not in (index, index + 1))
    shapes_meet = (pw.batch, pw.cin_g, pw.in_sizes) == (dw.batch, dw.groups, dw.out_sizes)
    return shapes_meet and not any(reads(s, out) for s in others)


def _bare_depthwise(kernel: ConvKernel) -> bool:
    """A forward depthwise convolution storing its accumulator as it is."""
    return (
        kernel.rows_sweep
        and kernel.kernel_numel <= FUSED_TAPS
        and not kernel.wide
        and len(kernel.stores) == 1
        and kernel.stores[0].value == var("acc")
        and kernel.stores[0].space == "full"
    )


def _pointwise(kernel: ConvKernel) -> bool:
    """A forward 1x1 convolution of one group over its input as stored."""
    ones = all(k == 1 for k in kernel.kernel)
    unit = all(s == 1 for s in kernel.stride) and all(p == 0 for p in kernel.padding)
    return (
        ones
        and unit
        and not kernel.transposed
        and kernel.groups == 1
        and kernel.channel_loop
        and not kernel.x_channels_last
        and not kernel.wide
    )


def _fused(first: Step, second: Step) -> Step:
    """The 1x1 convolution's step reading the depthwise input and weights in place of the
    depthwise output: x's slot takes the depthwise input, a new argument its weights."""
    dw, pw = first.kernel, second.kernel
    assert isinstance(dw, ConvKernel) and isinstance(pw, ConvKernel)
    inputs = list(second.inputs)
    inputs[pw.inputs.index(pw.x)] = first.inputs[dw.inputs.index(dw.x)]
    w_arg = _free_name(len(pw.inputs), pw.inputs + pw.outputs)
    inputs.append(first.inputs[dw.inputs.index(dw.w)])
    depthwise = replace(dw, x=pw.x, w=w_arg, inputs=[], outputs=[], stores=[])
    kernel = replace(pw, inputs=[*pw.inputs, w_arg], depthwise_input=depthwise)
    return replace(second, kernel=kernel, inputs=inputs)


def _free_name(n: int, taken: list[str]) -> str:
    while f"in{n}" in taken:
        n += 1
    return f"in{n}"


__all__ = ["FUSED_TAPS", "fuse_depthwise_pointwise"]
