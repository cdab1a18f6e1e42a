"""The Triton backend's FusedKernel family: pointwise and row kernels' default configs,
tunables, sources and launch grids, by the rules in tools/builtin/triton_backend.py's docstring
(which holds the family table)."""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin import triton_emit, triton_resident, triton_rows
from kernelgraph.tools.builtin.expr import loads
from kernelgraph.tools.builtin.kernels import FusedKernel, next_pow2

SMS = 132  # streaming multiprocessors of an H100 SXM: "too few programs" is relative to this
MAX_PERSISTENT_R = 32768  # longer rows loop: softmax's max and sum online, in one pass
STREAM_BLOCK_R = 4096  # a looped one-pass row's block: 16 fp32 of each input a thread
LOOPED_BLOCK_R = 16384  # a looped row's block when it has one reduction (32 fp32 a thread)
INTERPRETER_BLOCK = 1 << 16
STRIDED_TILE = 16384  # elements of a strided persistent tile (BLOCK_K x BLOCK_R), H100 sweep


def strided_persistent(kernel: FusedKernel) -> bool:
    """Strided rows are held whole when the kernel would otherwise read them more than once
    (several reductions, or full-space stores) and a tile of 16 of them fits."""
    passes = len(kernel.reductions) + any(s.space == "full" for s in kernel.stores)
    return passes > 1 and next_pow2(kernel.rlen) * 16 <= STRIDED_TILE


def _strided_tile(kernel: FusedKernel) -> dict[str, Any]:
    """A tile of strided rows read in a loop. On the H200 (level1/48 and 52, [128, 4096, 4095]
    over dim 1) a mean ran 2.08 ms at 64 x 64 x 4 warps and 5.24-5.37 at 128 x 64 x 8, while an
    argmin, which carries positions too, ran 2.03-2.11 at 128 x 64 x 8 and 3.57 at 64 x 64 x 8."""
    block_r = min(next_pow2(kernel.rlen), 64)
    if any(r.kind.startswith("arg") for r in kernel.reductions):
        return {"BLOCK_K": min(next_pow2(kernel.rows), 128), "BLOCK_R": block_r, "num_warps": 8}
    block_k = min(next_pow2(kernel.rows), 64)
    # Few, long columns (a linear layer's weight reduced over its rows, [8192, 8192]): 64-wide
    # tiles left fewer programs than SMs, each looping over megabytes; narrower, deeper tiles
    # of the same size give every SM several (a 16-float line is still two full sectors).
    # With 8 warps: an H100 reduced a [8192, 8192] weight's rows in 104 us, against 115 with 4.
    warps = 4
    while block_k > 16 and kernel.rows // block_k < 2 * SMS and block_r < next_pow2(kernel.rlen):
        block_k, block_r, warps = block_k // 2, block_r * 2, 8
    return {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": warps}


def _streams_once(kernel: FusedKernel) -> bool:
    """Rows read in one pass (every reduction independent, nothing stored per element) whose
    loads would not fit a program's registers whole (cosine similarity: two rows of 32768): a
    loop holds one block of each at a time, so several programs share an SM and hide latency."""
    if len(kernel.passes()) > 1 or any(s.space == "full" for s in kernel.stores):
        return False
    tensors = {ld.tensor for r in kernel.reductions for ld in loads(r.value) if ld.space == "full"}
    return kernel.rlen * len(tensors) > MAX_PERSISTENT_R


def _warps(elements: int) -> int:
    return 4 if elements <= 2048 else 8 if elements <= 8192 else 16


def default(kernel: FusedKernel, gpu: bool) -> dict[str, Any]:
    if kernel.is_pointwise():
        if not gpu:
            return {"BLOCK": min(next_pow2(kernel.numel), INTERPRETER_BLOCK), "num_warps": 1}
        return {"BLOCK": 1024, "num_warps": 4}
    if not gpu:
        block_r = min(next_pow2(kernel.rlen), INTERPRETER_BLOCK)
        block_k = max(1, min(next_pow2(kernel.rows), INTERPRETER_BLOCK // block_r))
        return {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": 1}
    if kernel.inner > 1:  # rows are strided: tile along the contiguous inner axis
        if strided_persistent(kernel):
            block_r = next_pow2(kernel.rlen)
            block_k = max(16, min(64, STRIDED_TILE // block_r))
            return {"BLOCK_K": min(block_k, next_pow2(kernel.rows)), "BLOCK_R": block_r,
                    "num_warps": 8}  # fmt: skip
        return _strided_tile(kernel)
    if kernel.rlen > MAX_PERSISTENT_R:  # H200: 16384 x 16 warps only paid with one reduction
        if triton_resident.fits(kernel, SMS):  # read once, not once per pass
            return {"BLOCK_K": 1, "BLOCK_R": triton_resident.DEFAULT_BLOCK_R,
                    "num_warps": triton_resident.DEFAULT_WARPS, "RESIDENT": True}  # fmt: skip
        if len(kernel.reductions) == 1:
            return {"BLOCK_K": 1, "BLOCK_R": LOOPED_BLOCK_R, "num_warps": 16}
        return {"BLOCK_K": 1, "BLOCK_R": 4096, "num_warps": 8}
    if _streams_once(kernel):
        return {"BLOCK_K": 1, "BLOCK_R": STREAM_BLOCK_R, "num_warps": 8}
    block_r = next_pow2(kernel.rlen)
    block_k = max(1, min(next_pow2(kernel.rows), 2048 // block_r))
    return {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": _warps(block_k * block_r)}


def tunables(kernel: FusedKernel, gpu: bool) -> dict[str, list[Any]]:
    if not gpu:
        return {}
    if kernel.is_pointwise():
        return {"BLOCK": [512, 1024, 2048, 4096], "num_warps": [2, 4, 8]}
    if kernel.inner > 1 and strided_persistent(kernel):
        block_r = next_pow2(kernel.rlen)
        ks = [k for k in (16, 32, 64, 128) if k * block_r <= 2 * STRIDED_TILE]
        return {"BLOCK_K": ks, "num_warps": [4, 8, 16]}
    if kernel.inner > 1:
        return {"BLOCK_K": [16, 32, 64, 128], "BLOCK_R": [8, 16, 32, 64, 128, 256],
                "num_warps": [4, 8]}  # fmt: skip
    if kernel.rlen > MAX_PERSISTENT_R:
        if triton_resident.fits(kernel, SMS):
            return {"RESIDENT": [True, False], "BLOCK_R": [4096, 8192, 16384],
                    "num_warps": [4, 8, 16]}  # fmt: skip
        return {"BLOCK_R": [4096, 8192, 16384], "num_warps": [8, 16]}
    if _streams_once(kernel):
        return {"BLOCK_R": [2048, 4096, 8192], "num_warps": [4, 8, 16]}
    block_r = next_pow2(kernel.rlen)
    ks = sorted({max(1, 2048 // block_r) * f for f in (1, 2, 4)} | {1})
    return {"BLOCK_K": ks, "num_warps": [4, 8, 16]}


def fused_source(kernel: FusedKernel, gpu: bool, config: dict[str, Any]) -> str:
    if kernel.is_pointwise():
        return triton_emit.pointwise_source(kernel, gpu)
    if config.get("RESIDENT"):
        return triton_resident.resident_source(kernel, gpu, config["BLOCK_R"])
    persistent = config["BLOCK_R"] >= kernel.rlen
    return triton_rows.row_source(kernel, gpu, persistent)


def grid(kernel: FusedKernel, config: dict[str, Any]) -> str:
    if kernel.is_pointwise():
        return triton_emit.pointwise_grid(kernel, config["BLOCK"])
    return f"(triton.cdiv({kernel.rows}, {config['BLOCK_K']}),)"
