"""Convolutions (standard and transposed; 1d/2d/3d; strided, padded, dilated, grouped) as a
`ConvKernel`, written under `--policy strict` (under `hybrid` the library call stays).

A convolution is an implicit GEMM per group: M = batch x output positions, N = the group's
output channels, K = the group's input channels x kernel positions. The A tile is gathered from
the input on the fly (no im2col buffer): a standard convolution reads input position
`o * stride - padding + k * dilation`; a transposed one reads `i = (o + padding - k * dilation)
/ stride` where that divides exactly. Like a GEMM, a convolution anchors its kernel: the ops
after it are an epilogue over var("acc") (bias included) and var("idx") (the flat output
index). Depthwise convolutions (one input and one output channel per group) take a direct
kernel instead: forward ones sweep a plane's rows (tools/builtin/triton_conv_depthwise.py),
transposed ones or larger windows compute one output per lane.

With enough input channels per group (CHANNEL_LOOP_MIN) the K loop runs over kernel positions,
then blocks of input channels: the input position of each row and its padding test are then
computed once per kernel position, not per K element, and a transposed convolution's rows are
grouped by stride phase (output positions congruent modulo the stride), so that each phase
visits only the kernel positions that reach it (1 in stride**dims otherwise). With fewer input
channels the flat K loop (channel, kernel position) does the same where dilation is 1: a phase's
K holds only its taps, every stride-th kernel position (level2/89's 3-channel 3x3x3 stride-2
transposed convolution: K = 24, not 81 columns of which 7 in 8 were masked).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kernelgraph.tools.builtin.kernels import Store

CONVOLUTIONS = frozenset({"convolution", "_convolution"})
INT32_LIMIT = 2**31 - 1
CHANNEL_LOOP_MIN = 8
SWEEP_TAPS = 128  # depthwise windows up to this many positions are swept by rows (unrolled)
# products a row sums with a transposed convolution's innermost dim in output order (input
# channels, at least a 16-deep dot, x kernel positions / the outer dims' phases) at or below
# which that dim is not grouped by phase (`inner_unphased`). Phased against not, H100: level1/81
# (57.6) 1.39 -> 0.41 ms, level1/79 (96) 1.52 -> 0.72; above it level1/75 (120) 1.03 -> 1.27,
# level2/74 (108) 0.432 -> 0.447, level2/15 (108) 0.857 -> 0.807; H200: level1/73 and level2/26
# (216) 5-7% slower, level2/16 (288) 13%
UNPHASED_MAX_K = 96
MIN_DOT_K = 16  # tl.dot's shortest K


@dataclass
class ConvKernel:
    name: str
    batch: int
    groups: int
    cin_g: int  # input channels per group
    cout_g: int  # output channels per group
    in_sizes: list[int]  # spatial sizes of the input
    out_sizes: list[int]
    kernel: list[int]
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    transposed: bool
    x: str  # kernel argument names
    w: str
    x_strides: list[int]  # [n, c, *spatial], in elements
    w_group: int  # weight strides, in elements: between groups,
    w_co: int  # output channels of a group,
    w_ci: int  # input channels of a group,
    w_k: list[int]  # kernel positions
    inputs: list[str]
    outputs: list[str]
    stores: list[Store] = field(default_factory=list)
    wide: bool = False  # offsets past int32: int64 index arithmetic
    # the launch copies x channels-last first (tools/builtin/layouts.py); x_strides are the copy's
    x_channels_last: bool = False
    # every path to the outputs sums many of its elements: one TF32 product is within tolerance
    # (tools/builtin/averaging.py)
    averaged: bool = False
    kind: str = "conv"

    @property
    def k(self) -> int:
        return self.cin_g * self.kernel_numel

    @property
    def m(self) -> int:
        return self.batch * self.out_numel

    @property
    def kernel_numel(self) -> int:
        return math.prod(self.kernel)

    @property
    def out_numel(self) -> int:
        return math.prod(self.out_sizes)

    @property
    def numel(self) -> int:
        return self.m * self.groups * self.cout_g

    @property
    def flops(self) -> int:
        return 2 * self.numel * self.k

    @property
    def depthwise(self) -> bool:
        return self.cin_g == 1 and self.cout_g == 1

    @property
    def rows_sweep(self) -> bool:
        """A forward depthwise convolution written as row sweeps
        (tools/builtin/triton_conv_depthwise.py); a transposed one or a larger window keeps
        the flat direct kernel."""
        return self.depthwise and not self.transposed and self.kernel_numel <= SWEEP_TAPS

    @property
    def channel_loop(self) -> bool:
        return not self.depthwise and self.cin_g >= CHANNEL_LOOP_MIN

    @property
    def inner_unphased(self) -> bool:
        """The innermost dim in output coordinates, not stride phases: each row masks the taps
        that miss it (more products, all of one tap's rows in one tile), and a tile stores whole
        lines, not every stride-th element. The channel loop only: the flat K loop's per-element
        masks made level2/50, 58, 60, 72, 89 and 96 3.0-4.8x slower (H100)."""
        outer = math.prod(self.stride[:-1])
        narrow = max(self.cin_g, MIN_DOT_K) * self.kernel_numel / outer <= UNPHASED_MAX_K
        return self.transposed and self.channel_loop and self.stride[-1] > 1 and narrow

    @property
    def phase_strides(self) -> list[int]:
        """The stride each spatial dim's rows are grouped by phase over (1: not grouped). The
        flat K loop takes phases where dilation is 1, so a phase's taps are every stride-th
        position."""
        phased = self.channel_loop or all(d == 1 for d in self.dilation)
        if not (self.transposed and phased and not self.depthwise):
            return [1] * len(self.stride)
        return [*self.stride[:-1], 1 if self.inner_unphased else self.stride[-1]]

    @property
    def phases(self) -> int:
        """Stride phases a transposed convolution's rows are grouped by (1: none)."""
        return math.prod(self.phase_strides)

    @property
    def taps(self) -> list[int]:
        """Kernel positions along each dim that reach one phase's outputs (at most)."""
        if self.phases == 1 or self.channel_loop:
            return list(self.kernel)
        return [-(-k // s) for k, s in zip(self.kernel, self.stride, strict=True)]

    @property
    def flat_k(self) -> int:
        """The flat K loop's length: input channels x the taps of a phase."""
        return self.cin_g * math.prod(self.taps)

    @property
    def phase_sizes(self) -> list[int]:
        """Output positions per phase along each spatial dim (the largest phase's)."""
        return [-(-o // s) for o, s in zip(self.out_sizes, self.phase_strides, strict=True)]

    @property
    def phase_m(self) -> int:
        return self.batch * math.prod(self.phase_sizes)

    def describe(self) -> str:
        what = "transposed convolution" if self.transposed else "convolution"
        how = "direct (depthwise)" if self.depthwise else "implicit GEMM"
        return (f"{self.name}: {len(self.kernel)}d {what}, {how}, {self.groups} group(s) of "
                f"[{self.m}x{self.k}] @ [{self.k}x{self.cout_g}]; pointwise epilogue fused")  # fmt: skip

    def axes(self) -> str:
        if self.rows_sweep:
            return f"{self.name}: output columns (BLOCK_W tiles), rows (ROWS chunks), planes"
        if self.depthwise:
            return f"{self.name}: output elements"
        return f"{self.name}: output positions (M tiles), output channels (N tiles), groups"

    def grid(self) -> str:
        if self.rows_sweep:
            return "(cdiv(W, BLOCK_W) * cdiv(H, ROWS) * batch * channels * outer positions,)"
        if self.depthwise:
            return "cdiv(numel, BLOCK)"
        if self.phases > 1:
            return "(cdiv(M / phases, BLOCK_M) * cdiv(N, BLOCK_N) * stride phases, groups)"
        return "(cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), groups)"

    def pseudo(self) -> str:
        return (f"{self.name}: acc[m, co] = sum_k gather(x)[m, k] w[k, co] (fp32); "
                f"out = epilogue(acc + bias)")  # fmt: skip


@dataclass(frozen=True)
class ConvSpec:
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    transposed: bool
    groups: int


def conv_spec(op: dict[str, Any]) -> ConvSpec:
    argv = op["argv"]
    return ConvSpec(list(argv[3]), list(argv[4]), list(argv[5]), bool(argv[6]), int(argv[8]))


def conv_kernel(name: str, spec: ConvSpec, x, w, args: tuple[str, str], out_shape: list[int],
                stores: list[Store], inputs: list[str], outputs: list[str]) -> ConvKernel:  # fmt: skip
    """The kernel of a convolution of `x` by `w` (Values; `args` their argument names)."""
    dims = len(out_shape) - 2
    cin_g = x.shape[1] // spec.groups
    cout_g = w.shape[1] if spec.transposed else w.shape[0] // spec.groups
    spans = [1 + sum((s - 1) * abs(st) for s, st in zip(v.shape, v.strides, strict=True))
             for v in (x, w)]  # fmt: skip
    wide = max(*spans, math.prod(out_shape)) > INT32_LIMIT
    ws = list(w.strides)
    if spec.transposed:  # [cin, cout_g, *k]
        w_group, w_co, w_ci = cin_g * ws[0], ws[1], ws[0]
    else:  # [cout, cin_g, *k]
        w_group, w_co, w_ci = cout_g * ws[0], ws[0], ws[1]
    return ConvKernel(name, out_shape[0], spec.groups, cin_g, cout_g, list(x.shape[2:]),
                      list(out_shape[2:]), list(w.shape[2:]), _each(spec.stride, dims),
                      _each(spec.padding, dims), _each(spec.dilation, dims), spec.transposed,
                      args[0], args[1], list(x.strides), w_group, w_co, w_ci, ws[2:], inputs,
                      outputs, stores, wide)  # fmt: skip


def _each(values: list[int], dims: int) -> list[int]:
    return list(values) * dims if len(values) == 1 else list(values)


__all__ = ["CONVOLUTIONS", "ConvKernel", "ConvSpec", "conv_kernel", "conv_spec"]
