"""Operands rounded or split to TF32 once per forward, ahead of the tensor-core products.

Convolutions' tf32rn/tf32rna reproduce cuDNN's TF32: each operand rounded to nearest (ties to
even, or away from zero), then one TF32 product. Rounding inside the K loop costs every program
every step, so the launch rounds operands ahead: the weights in place of their layout
(`rounded_copy`) and the input while it is copied channels-last anyway (`channels_last_copy`,
tools/builtin/layouts.py). GEMMs' tf32x3_presplit (tools/builtin/triton_gemm.py) splits each
operand ahead into a TF32 high part and the TF32-rounded rest (`split_copy`). All are Triton
kernels: the same rounding in torch ops is compute the strict policy forbids.
"""

from __future__ import annotations

# fp32 to TF32 rounded to nearest, by DOT value. cuDNN's TF32 kernels do not all round alike
# (H200, the first convolution of 98 KernelBench problems against operands rounded each way,
# benchmarks/RESULTS.md): forward implicit GEMMs round ties away from zero, transposed and 1x1
# convolutions (cuBLAS's TF32 GEMM) ties to even. tl.dot's "tf32" does not round at all.
_BITS = "{x}.to(tl.uint32, bitcast=True)"
ROUNDINGS = {
    "tf32rn": f"(({_BITS} + 0xFFF + (({_BITS} >> 13) & 1)) & 0xFFFFE000).to(tl.float32, bitcast=True)",
    "tf32rna": f"(({_BITS} + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)",
}
ROUND_BLOCK = 1024
LOW_ALIGN = 32  # elements: 128 bytes
CHANNEL_BLOCK, POSITION_BLOCK = 32, 128

# every element of a tensor's memory span, gaps included, into a tensor of the same strides
_ROUND_KERNEL = """@triton.jit
def _round(src, dst, span, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < span)
    tl.store(dst + offs, ROUNDED, mask=offs < span)
"""

# [n, c, p] (contiguous) to [n, p, c]: loads run along p, stores along c
_CHANNELS_LAST_KERNEL = """@triton.jit
def _channels_last(src, dst, channels, positions, position_tiles,
                   BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    n = (tl.program_id(0) // position_tiles).to(tl.int64)
    p = (tl.program_id(0) % position_tiles).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = (tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)
    ok = (c[:, None] < channels) & (p[None, :] < positions)
    base = n * channels * positions
    x = tl.load(src + base + c[:, None] * positions + p[None, :], mask=ok)
    tl.store(dst + base + p[None, :] * channels + c[:, None], ROUNDED, mask=ok)
"""

# hi: x truncated to TF32 (cannot overflow to inf, as rounding up from the largest float would);
# lo: the exact rest x - hi, rounded to nearest TF32 (0 for an infinite x, whose rest is NaN).
# hi + lo is x within 2^-22 of |x|, and both are exact TF32 values, which a TF32 product reads
# without loss.
_SPLIT_KERNEL = """@triton.jit
def _split_tf32(src, dst, span, low, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < span)
    hi = (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
    rest = tl.where(hi == x, 0.0, x - hi)
    tl.store(dst + offs, hi, mask=offs < span)
    tl.store(dst + low + offs, LOW, mask=offs < span)
"""

# the same split in registers, for a kernel that splits its own tiles (triton_gemm_sweep.py)
_HIGH_PART = """@triton.jit
def _tf32_hi(x):
    return (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
"""
_LOW_PART = """@triton.jit
def _tf32_lo(x, hi):
    rest = tl.where(hi == x, 0.0, x - hi)
    return LOW
"""

HELPERS = {
    f"{name}_{dot}": text.replace(name, f"{name}_{dot}").replace("ROUNDED", rounding.format(x="x"))
    for dot, rounding in ROUNDINGS.items()
    for name, text in (("_round", _ROUND_KERNEL), ("_channels_last", _CHANNELS_LAST_KERNEL))
}
HELPERS["_split_tf32"] = _SPLIT_KERNEL.replace("LOW", ROUNDINGS["tf32rna"].format(x="rest"))
HELPERS["_tf32_hi"] = _HIGH_PART
HELPERS["_tf32_lo"] = _LOW_PART.replace("LOW", ROUNDINGS["tf32rna"].format(x="rest"))


def rounded_copy(source: str, copy: str, dot: str) -> list[str]:
    """Lines that make `copy`: `source` rounded as DOT `dot` rounds, in the same strides."""
    span = f"{copy}_span"
    return [
        f"{copy} = torch.empty_strided({source}.shape, {source}.stride(), "
        f"device={source}.device, dtype=torch.float32)",
        f"{span} = 1 + sum((n - 1) * s for n, s in zip({source}.shape, {source}.stride()))",
        f"_round_{dot}[(triton.cdiv({span}, {ROUND_BLOCK}),)]({source}, {copy}, {span}, "
        f"BLOCK={ROUND_BLOCK})",
    ]


def low_offset(span: int) -> int:
    """Where a split copy's low parts start: past the `span` high ones, at a multiple of
    LOW_ALIGN elements, so that a line aligned in the high parts is aligned in the low ones (at
    `span` itself, level1/8's odd span of 24221157 left every low-part load 4 bytes wide)."""
    return -(-span // LOW_ALIGN) * LOW_ALIGN


def split_copy(source: str, copy: str, span: int) -> list[str]:
    """Lines that make `copy`: the `span` elements from `source`'s first, split in two TF32
    parts, the high ones at `copy` and the rest `low_offset(span)` elements later, each in
    `source`'s strides (so a kernel reads both at the offsets it read `source` at)."""
    low = low_offset(span)
    return [
        f"{copy} = torch.empty(({low + span},), device={source}.device, dtype=torch.float32)",
        f"_split_tf32[(triton.cdiv({span}, {ROUND_BLOCK}),)]({source}, {copy}, {span}, {low}, "
        f"BLOCK={ROUND_BLOCK})",
    ]


def channels_last_copy(
    source: str, copy: str, batch: int, channels: int, positions: int, dot: str | None
) -> list[str]:
    """Lines that make `copy`: `source` ([n, c, *positions]) channels-last, flat in memory, and
    rounded as DOT `dot` rounds (none: not rounded)."""
    if dot is None:
        return [f"{copy} = {source}.movedim(1, -1).contiguous().movedim(-1, 1)"]
    tiles = f"triton.cdiv({positions}, {POSITION_BLOCK})"
    grid = f"({batch} * {tiles}, triton.cdiv({channels}, {CHANNEL_BLOCK}))"
    return [
        f"{copy} = torch.empty(({batch * channels * positions},), device={source}.device, "
        "dtype=torch.float32)",
        f"_channels_last_{dot}[{grid}]({source}.contiguous(), {copy}, {channels}, {positions}, "
        f"{tiles}, BLOCK_C={CHANNEL_BLOCK}, BLOCK_P={POSITION_BLOCK})",
    ]
