"""Convolution operands rounded to TF32 once per forward, before the tf32rn/tf32rna products.

Those reproduce cuDNN's TF32: each operand rounded to nearest (ties to even, or away from zero),
then one TF32 product. Rounding inside the K loop costs every program every step, so the launch rounds
operands ahead: the weights in place of their layout (`rounded_copy`) and the input while it
is copied channels-last anyway (`channels_last_copy`, tools/builtin/layouts.py). Both are
Triton kernels: the same rounding in torch ops is compute the strict policy forbids.
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

HELPERS = {
    f"{name}_{dot}": text.replace(name, f"{name}_{dot}").replace("ROUNDED", rounding.format(x="x"))
    for dot, rounding in ROUNDINGS.items()
    for name, text in (("_round", _ROUND_KERNEL), ("_channels_last", _CHANNELS_LAST_KERNEL))
}


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
