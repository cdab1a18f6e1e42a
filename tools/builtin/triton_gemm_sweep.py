"""fp32 GEMMs of a short K as row sweeps: a program keeps its A rows and walks N tiles.

With K of one or two 32-deep steps (KernelBench's level1/7 and 9: 32768 x 32768 outputs of K = 64
and 32), a tile is a few tensor-core products between a load and a 32-64 KB store, and a program
per tile spends most of its time waiting on one or the other (ncu on the H100: DRAM 44%, tensor
pipes 30%, 12% occupancy). Here a program loads its BLOCK_M rows of A once, splits them into TF32
parts once, and sweeps SWEEP_N columns of the output tile by tile: the loop over N tiles is one
Triton pipelines, so the next B tile loads while this one's products and stores run.
Under tf32x3 each B tile is split in registers (hi truncated, lo the rounded rest, as
tf32_copies' split kernel does), so no operand copy is made ahead.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin import triton_gemv
from kernelgraph.tools.builtin.kernels import GemmKernel, next_pow2

# K of one or two 32-deep steps: level1/7 (K = 64) 3.21 -> 2.31 ms, level1/9 (K = 32) 1.65 -> 1.54
# against a program per 64 x 128 tile (H100, benchmarks/RESULTS.md)
SHORT_K = 64
# programs a sweep's default aims at: 2048 of 4 warps (level1/7 and 9 at 128 x 64 tiles)
PROGRAMS = 2048
SPAN_QUANTUM = 128  # SWEEP_N is a multiple of every BLOCK_N tuned
SHARED_LIMIT = 232448  # bytes of shared memory one program may take on sm_90


def applies(kernel: GemmKernel, gpu: bool, fp32: bool) -> bool:
    """A tiled fp32 GEMM (DOT tuned) on a GPU whose whole K is one block of at most SHORT_K."""
    return (
        gpu
        and fp32
        and not triton_gemv.is_gemv(kernel)
        and kernel.split_k == 1
        and kernel.k <= SHORT_K
    )


def _sweep_n(kernel: GemmKernel, block_m: int) -> int:
    """Columns a program sweeps: enough programs to fill the GPU (PROGRAMS), the rest in
    each program's loop."""
    m_tiles = -(-kernel.m // block_m) * kernel.batch
    quanta = -(-kernel.n // SPAN_QUANTUM)
    spans = max(1, min(quanta, PROGRAMS // m_tiles))
    return -(-quanta // spans) * SPAN_QUANTUM


def default(kernel: GemmKernel) -> dict[str, Any]:
    """128 x 64 tiles at K = 64, 64 x 128 at K <= 32 (H100: level1/7 2.31 ms against 4.24 at
    64 x 128; level1/9 1.54 against 1.59 at 128 x 64). Both sweep the spans of 128-row blocks."""
    block_m, block_n = (64, 128) if kernel.k <= 32 else (128, 64)
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": max(16, next_pow2(kernel.k)),
            "SWEEP_N": _sweep_n(kernel, 128), "DOT": "tf32x3", "num_warps": 4,
            "num_stages": 2}  # fmt: skip


def tunables(kernel: GemmKernel) -> dict[str, list[Any]]:
    sweep = _sweep_n(kernel, 128)
    spans = sorted({sweep, max(SPAN_QUANTUM, sweep // 4), sweep * 4})
    return {"DOT": ["tf32x3", "ieee"], "BLOCK_M": [128, 64], "BLOCK_N": [64, 128],
            "SWEEP_N": spans, "num_warps": [4, 8], "num_stages": [2, 3]}  # fmt: skip


def fits(kernel: GemmKernel, config: dict[str, Any]) -> bool:
    """Whole tiles a sweep, and shared memory for the staged B tiles, A's two parts and the
    output tile the store goes through (within a few KB of what Triton took, sm_90a)."""
    m, n, k = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    stages = config.get("num_stages", 2)
    shared = (stages * k * n + 2 * m * k + m * n) * 4
    return config["SWEEP_N"] % n == 0 and shared <= SHARED_LIMIT


def grid(kernel: GemmKernel, config: dict[str, Any]) -> str:
    return (f"(triton.cdiv({kernel.m}, {config['BLOCK_M']}) * "
            f"triton.cdiv({kernel.n}, {config['SWEEP_N']}), {kernel.batch}, 1)")  # fmt: skip


def body(kernel: GemmKernel, epilogue: list[str]) -> list[str]:
    """The program's A rows, then its loop over N tiles, each ending in `epilogue` (the
    stores, which read `acc`, `rm`, `rn` and `bid`). Consecutive programs take consecutive row
    blocks of one column span, so the B tiles they read at once are the same ones."""
    a, b = kernel.a, kernel.b
    return [
        "pid = tl.program_id(0)",
        "bid = tl.program_id(1)",
        f"num_m = tl.cdiv({kernel.m}, BLOCK_M)",
        "pid_m = pid % num_m",
        "n_first = (pid // num_m) * SWEEP_N",
        "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "rk = tl.arange(0, BLOCK_K)",
        f"kmask = rk < {kernel.k}",
        f"am = rm % {kernel.m}",
        f"a = tl.load({a.arg} + bid * {a.strides[0]} + am[:, None] * {a.strides[1]}"
        f" + rk[None, :] * {a.strides[2]}, mask=kmask[None, :], other=0.0)",
        'if DOT == "tf32x3":',
        "    a_hi = _tf32_hi(a)",
        "    a_lo = _tf32_lo(a, a_hi)",
        f"b_rows = {b.arg} + bid * {b.strides[0]} + rk[:, None] * {b.strides[1]}",
        f"for n0 in range(n_first, min(n_first + SWEEP_N, {kernel.n}), BLOCK_N):",
        "    rn = n0 + tl.arange(0, BLOCK_N)",
        f"    b = tl.load(b_rows + (rn % {kernel.n})[None, :] * {b.strides[2]},"
        " mask=kmask[:, None], other=0.0)",
        '    if DOT == "tf32x3":',
        "        # the low parts' products first, into a fresh accumulator, as tf32x3 does",
        "        b_hi = _tf32_hi(b)",
        '        acc = tl.dot(a_lo, b_hi, input_precision="tf32")',
        '        acc = tl.dot(a_hi, _tf32_lo(b, b_hi), acc, input_precision="tf32")',
        '        acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")',
        "    else:",
        "        acc = tl.dot(a, b, input_precision=DOT)",
        *("    " + line for line in epilogue),
    ]
