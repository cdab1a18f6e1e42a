"""Matrix-vector products (a GEMM with N = 1 or M = 1) as streaming reductions.

Such a product reads each element of the matrix once and does two FLOPs with it, so it is bound
by memory; a tensor-core tile of 128 x 128 would compute 128 times what is needed and leave
most lanes idle (KernelBench's level1/4 ran at 0.06x of cuBLAS's gemv that way). Here each
program owns a strip of the output and walks K in blocks, adding products elementwise into a
register tile that is summed once at the end: along K where K is the matrix's contiguous axis
(A @ x, a linear layer on one sample), down K otherwise. The GEMM's epilogue and split-K work
unchanged.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin.kernels import GemmKernel, next_pow2

INT32_LIMIT = 2**31 - 1
ROWS = 2  # output rows per program of A @ x: 2 x 2048 products in flight, 8 warps (H200 sweep)
COLUMNS = 128  # output columns per program of x @ W


def is_gemv(kernel: GemmKernel) -> bool:
    return kernel.n == 1 or kernel.m == 1


def _strip(kernel: GemmKernel) -> tuple[str, str, int]:
    """The output axis programs split: (its block constexpr, its index, its length)."""
    return ("BLOCK_M", "rm", kernel.m) if kernel.n == 1 else ("BLOCK_N", "rn", kernel.n)


def _along_rows(kernel: GemmKernel) -> bool:
    """Whether the matrix is read along K (a tile [strip, BLOCK_K] summed over its rows), as
    when K is its contiguous axis; else down K ([BLOCK_K, strip], contiguous along the strip)."""
    if kernel.n == 1:  # A @ x, A [M, K]
        return kernel.a.strides[2] == 1 or kernel.a.strides[1] != 1
    return kernel.b.strides[1] == 1 or kernel.b.strides[2] != 1  # x @ B, B [K, N]


def body(kernel: GemmKernel, k_range: list[str]) -> list[str]:
    """Lines up to the accumulator `acc` [BLOCK_M, BLOCK_N], with `rm` and `rn` set as in a GEMM."""
    a, b = kernel.a, kernel.b
    block, strip, length = _strip(kernel)
    wide = ".to(tl.int64)" if _past_int32(kernel) else ""
    rows = _along_rows(kernel)
    mine, other = (f"({strip} % {length}){wide}", f"rk{wide}")
    # the matrix's two index vectors, broadcast to the tile: [strip, K] along rows, else [K, strip]
    m_out, m_k = (f"{mine}[:, None]", f"{other}[None, :]") if rows else (
        f"{mine}[None, :]", f"{other}[:, None]")  # fmt: skip
    # (pointer, tensor, offset) of the matrix, then of the vector: A @ x, else x @ B
    if kernel.n == 1:
        matrix = ("a_ptr", a, f"{m_out} * {a.strides[1]} + {m_k} * {a.strides[2]}")
        vector = ("b_ptr", b, f"rk * {b.strides[1]}")
        other_axis = "rn = tl.arange(0, BLOCK_N)"
    else:
        matrix = ("b_ptr", b, f"{m_k} * {b.strides[1]} + {m_out} * {b.strides[2]}")
        vector = ("a_ptr", a, f"rk * {a.strides[2]}")
        other_axis = "rm = tl.arange(0, BLOCK_M)"
    pointers = sorted(
        f"{ptr} = {t.arg} + bid{wide} * {t.strides[0]} + {offset}"
        for ptr, t, offset in (matrix, vector)
    )
    k_mask, v_across = ("kmask[None, :]", "[None, :]") if rows else ("kmask[:, None]", "[:, None]")
    tile = f"({block}, BLOCK_K)" if rows else f"(BLOCK_K, {block})"
    total = f"tl.sum(part, axis={1 if rows else 0})"
    return [
        "bid = tl.program_id(1)",
        f"{strip} = tl.program_id(0) * {block} + tl.arange(0, {block})",
        other_axis,
        "rk = tl.arange(0, BLOCK_K)",
        *pointers,
        f"part = tl.zeros({tile}, dtype=tl.float32)",
        *k_range,
        "    kmask = rk < k_end - kk * BLOCK_K",
        f"    m = tl.load({matrix[0]}, mask={k_mask}, other=0.0)",
        f"    v = tl.load({vector[0]}, mask=kmask, other=0.0)",
        f"    part += m.to(tl.float32) * v.to(tl.float32){v_across}",
        f"    a_ptr += BLOCK_K * {a.strides[2]}",
        f"    b_ptr += BLOCK_K * {b.strides[1]}",
        f"acc = {total}[:, None]" if kernel.n == 1 else f"acc = {total}[None, :]",
    ]


def _past_int32(kernel: GemmKernel) -> bool:
    """Whether an operand's offsets can pass int32 (level1/4's A has 2**31 elements)."""
    extent = max(kernel.batch * kernel.m * kernel.k, kernel.batch * kernel.k * kernel.n)
    return extent > INT32_LIMIT


def default(kernel: GemmKernel, gpu: bool) -> dict[str, Any]:
    block, _, length = _strip(kernel)
    if _along_rows(kernel):
        strip, block_k = (ROWS, 2048) if gpu else (min(next_pow2(length), 64), 4096)
    else:
        strip, block_k = (COLUMNS, 64) if gpu else (min(next_pow2(length), 1024), 64)
    return {"BLOCK_M": 1, "BLOCK_N": 1, block: strip, "BLOCK_K": min(block_k, next_pow2(kernel.k)),
            "GROUP_M": 1, "num_warps": (8 if _along_rows(kernel) else 4) if gpu else 1}  # fmt: skip


def tunables(kernel: GemmKernel) -> dict[str, list[Any]]:
    block, _, _ = _strip(kernel)
    if _along_rows(kernel):
        return {block: [1, 2, 4, 8], "BLOCK_K": [512, 1024, 2048], "num_warps": [4, 8]}
    return {block: [64, 128, 256], "BLOCK_K": [16, 32, 64], "num_warps": [4, 8]}


def split_k(kernel: GemmKernel, sms: int) -> int:
    """Parts of K, so that at least two programs run per SM (a gemv's outputs can be few)."""
    _, _, length = _strip(kernel)
    strips = -(-length // (ROWS if _along_rows(kernel) else COLUMNS))
    programs = strips * kernel.batch
    if programs >= 2 * sms or kernel.k < 8192:
        return 1
    return max(1, min(-(-2 * sms // programs), kernel.k // 2048))
