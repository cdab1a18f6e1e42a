"""The Triton backend's GEMM family: default config, tunables, source and launch.

fp32 products run on tensor cores as three TF32 products. Triton's `tf32x3` splits each operand
tile into a TF32 high part and a low part inside the K loop, in every program at every step;
`tf32x3_presplit` has the launch split each operand once (tf32_copies.split_copy: the high
parts, then the rest), and its K loop is three plain TF32 products of exact TF32 values. The
split costs 12 bytes of traffic per operand element, so it is offered only where every element
of both operands is reused at least MIN_REUSE times (the other side's length), as the K-major
copy is (tools/builtin/layouts.py).
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin import tf32_copies, triton_gemm_sweep, triton_gemv
from kernelgraph.tools.builtin.expr import loads
from kernelgraph.tools.builtin.kernels import GemmKernel, next_pow2
from kernelgraph.tools.builtin.layouts import ALIGN, MIN_REUSE
from kernelgraph.tools.builtin.printer import Printer
from kernelgraph.tools.builtin.triton_emit import INT32_LIMIT, TritonSyntax, _indent, _signature

PRESPLIT = "tf32x3_presplit"
# one 32-deep K step splits each tile once either way: level1/9 (K = 32) ran 1.99 ms split ahead,
# 1.76 ms with tf32x3 (H100); K = 64 (level1/7) gained
MIN_K = 64
# fp32 products, fastest first: three TF32 tensor-core products per fp32 one (fp32-accurate,
# several times the FMA rate), then IEEE FMAs. torch's fp32 matmuls are IEEE at both precisions.
GEMM_DOTS = ("tf32x3", "ieee")


def presplit_applies(kernel: GemmKernel, gpu: bool) -> bool:
    """Whether the launch may split the operands ahead: on a GPU, a tiled (not GEMV, not
    split-K) product of at least two K steps whose two operands are distinct tensors, both
    reused enough, neither also read by the epilogue (which needs the tensor itself)."""
    if not gpu or triton_gemv.is_gemv(kernel) or kernel.split_k > 1:
        return False
    read_by_epilogue = {ld.tensor for s in kernel.stores for ld in loads(s.value)}
    operands = {kernel.a.arg, kernel.b.arg}
    return (
        len(operands) == 2
        and not operands & read_by_epilogue
        and min(kernel.m, kernel.n) >= MIN_REUSE
        and kernel.k >= MIN_K
    )


# 128 x 128 tiles below which tf32x3 in 64-deep blocks beats splitting ahead. H100, side by side
# (benchmarks/RESULTS.md): at 256-768 tiles (level2/29, level1/2, 16, 18, 10) 64-deep tf32x3 was
# 4-18% faster, at 1024 even (level1/13) or 6% slower (level2/53), at 4096 (level2/40) 7% slower
FEW_TILES = 1024


def few_tiles(kernel: GemmKernel) -> bool:
    return -(-kernel.m // 128) * -(-kernel.n // 128) * kernel.batch < FEW_TILES


def dots(kernel: GemmKernel, gpu: bool) -> tuple[str, ...]:
    """The DOT values a GEMM at fp32 may use, fastest first."""
    if not presplit_applies(kernel, gpu):
        return GEMM_DOTS
    if few_tiles(kernel):
        return (GEMM_DOTS[0], PRESPLIT, *GEMM_DOTS[1:])
    return (PRESPLIT, *GEMM_DOTS)


def default(kernel: GemmKernel, gpu: bool, precision: str, fp32: bool) -> dict[str, Any]:
    if triton_gemv.is_gemv(kernel):
        return triton_gemv.default(kernel, gpu)
    if triton_gemm_sweep.applies(kernel, gpu, fp32):
        return triton_gemm_sweep.default(kernel)
    dot = {"DOT": dots(kernel, gpu)[0]} if fp32 else {}
    if not gpu:
        return {"BLOCK_M": min(next_pow2(kernel.m), 64), "BLOCK_N": min(next_pow2(kernel.n), 64),
                "BLOCK_K": min(next_pow2(kernel.k), 64), "GROUP_M": 8, **dot, "num_warps": 1,
                "num_stages": 1}  # fmt: skip
    wide = precision in ("fp16", "bf16")
    # split-K (K >> M, N): 64-deep fp32 blocks, 1.78 ms against 1.95 at 32 (level1/6, H200);
    # few tiles split ahead no longer, in 64-deep blocks (FEW_TILES)
    deep = wide or kernel.split_k > 1 or (presplit_applies(kernel, gpu) and few_tiles(kernel))
    return {"BLOCK_M": 128, "BLOCK_N": 256 if wide else 128, "BLOCK_K": 64 if deep else 32,
            "GROUP_M": 8, **dot, "num_warps": 8, "num_stages": 3}  # fmt: skip


def tunables(kernel: GemmKernel, gpu: bool, fp32: bool) -> dict[str, list[Any]]:
    if not gpu:
        return {}
    if triton_gemv.is_gemv(kernel):
        return triton_gemv.tunables(kernel)
    if triton_gemm_sweep.applies(kernel, gpu, fp32):
        return triton_gemm_sweep.tunables(kernel)
    dot = {"DOT": list(dots(kernel, gpu))} if fp32 else {}
    return {**dot, "BLOCK_M": [64, 128], "BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64],
            "num_warps": [4, 8], "num_stages": [3, 4, 5]}  # fmt: skip


# bytes of shared memory one program may take on sm_90 (227 KB): Triton refuses more at compile
SHARED_LIMIT = 232448


def fits(kernel: GemmKernel, config: dict[str, Any]) -> bool:
    """Whether every pipeline stage's fp32 operand tiles (two copies each, split ahead) fit an
    SM's shared memory. Triton takes exactly stages x tiles for these (128 x 128 x 32 split
    ahead in 4 stages: "Required: 262144"), so a config past it can only fail to compile.
    Without DOT the operands' dtype is not known here: every config may be tried."""
    if "SWEEP_N" in config:
        return triton_gemm_sweep.fits(kernel, config)
    if "DOT" not in config or triton_gemv.is_gemv(kernel):
        return True
    m, n, k = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    copies = 2 if config["DOT"] == PRESPLIT else 1
    return config.get("num_stages", 3) * (m * k + k * n) * 4 * copies <= SHARED_LIMIT


def launch(kernel: GemmKernel, args: list[str], config: dict[str, Any]) -> list[str]:
    """The launch, after the operands' split copies under tf32x3_presplit."""
    lines, args = [], list(args)
    if config.get("DOT") == PRESPLIT:
        for side, operand in (("a", kernel.a), ("b", kernel.b)):
            slot, copy = kernel.inputs.index(operand.arg), f"{kernel.name}_{side}_split"
            lines += tf32_copies.split_copy(args[slot], copy, kernel.span(side))
            args[slot] = copy
    grid = (f"(triton.cdiv({kernel.m}, {config['BLOCK_M']}) * "
            f"triton.cdiv({kernel.n}, {config['BLOCK_N']}), {kernel.batch}, {kernel.split_k})")  # fmt: skip
    if "SWEEP_N" in config:
        grid = triton_gemm_sweep.grid(kernel, config)
    options = ", ".join(f"{k}={v!r}" for k, v in config.items())
    return [*lines, f"{kernel.name}[{grid}]({', '.join(args)}, {options})"]


def _k_range(kernel: GemmKernel) -> list[str]:
    """The K loop: all of K, or this program's share of it under split-K (grid axis 2)."""
    if kernel.split_k == 1:
        return [f"k_end = {kernel.k}", "for kk in range(0, tl.cdiv(k_end, BLOCK_K)):"]
    chunk = -(-kernel.k // kernel.split_k)
    return [
        f"k_first = tl.program_id(2) * {chunk}",
        f"k_end = tl.minimum({kernel.k} - k_first, {chunk})",
        "a_ptr += k_first * " + str(kernel.a.strides[2]),
        "b_ptr += k_first * " + str(kernel.b.strides[1]),
        "for kk in range(0, tl.cdiv(k_end, BLOCK_K)):",
    ]


def gemm_source(kernel: GemmKernel, gpu: bool, input_precision: str | None) -> str:
    """`input_precision`: Python source for tl.dot's argument ('"tf32"', or "DOT" for the
    constexpr tuning parameter), None for the dtype's default."""
    # Epilogue operands stay at offsets of idx here: read per column (tools/builtin/tile_offsets.py)
    # they made no GEMM faster and three with N = K = 32768 5% slower (benchmarks/RESULTS.md).
    if triton_gemm_sweep.applies(kernel, gpu, input_precision == "DOT"):
        body = triton_gemm_sweep.body(kernel, _epilogue(kernel, gpu))
        constexprs = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "SWEEP_N", "DOT"]
        return "\n".join([_signature(kernel, constexprs), *_indent(body)])
    constexprs = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]
    if triton_gemv.is_gemv(kernel):
        body = triton_gemv.body(kernel, _k_range(kernel))
    else:
        body = _gemm_body(kernel, input_precision, presplit_applies(kernel, gpu))
        if input_precision == "DOT":  # a tuning parameter (GEMM_DOTS, PRESPLIT)
            constexprs.append("DOT")
    body += _epilogue(kernel, gpu)
    return "\n".join([_signature(kernel, constexprs), *_indent(body)])


def _epilogue(kernel: GemmKernel, gpu: bool) -> list[str]:
    """From the accumulator `acc` of the tile at rows `rm`, columns `rn` of batch `bid`: its
    output offsets and mask, then the stores (or split-K's atomic add)."""
    printer = Printer(TritonSyntax(gpu))
    lines = [
        f"idx = (bid * {kernel.m} + rm[:, None]) * {kernel.n} + rn[None, :]",
        f"mask = (rm[:, None] < {kernel.m}) & (rn[None, :] < {kernel.n})",
    ]
    if kernel.batch * kernel.m * kernel.n > INT32_LIMIT:
        lines[0] = lines[0].replace("(bid *", "(bid.to(tl.int64) *")
    if kernel.split_k > 1:
        lines.append(f"tl.atomic_add({kernel.inputs[-1]} + idx, acc, mask=mask)")
    for store in kernel.stores:
        value = printer.value(store.value)
        lines += printer.take() + [f"tl.store({store.arg} + idx, {value}, mask=mask)"]
    return lines


def _products(
    kernel: GemmKernel, input_precision: str | None, presplit: bool, masks: tuple[str, str]
) -> list[str]:
    """One K step's products into `acc`. Under tf32x3_presplit (a constexpr branch, compiled
    only when DOT is it) each operand's low parts lie past its high ones (tf32_copies.
    low_offset), and the step's three products go into a fresh accumulator that an fp32 add
    takes into `acc`, as Triton's tf32x3 does: tensor cores add into an accumulator with
    truncation, and running all three into `acc` made errors 10-25x larger (level1/2 0.36
    against 0.013, H100). `masks`: the loads' mask arguments for a and b ("" for none)."""
    one = "acc = tl.dot(a, b, acc" + (
        f", input_precision={input_precision})" if input_precision else ")"
    )
    if not (presplit and input_precision == "DOT"):
        return [one]
    low_a, low_b = (tf32_copies.low_offset(kernel.span(side)) for side in "ab")
    return [
        f'if DOT == "{PRESPLIT}":',
        f"    a_lo = tl.load(a_ptr + {low_a}{masks[0]})",
        f"    b_lo = tl.load(b_ptr + {low_b}{masks[1]})",
        '    part = tl.dot(a_lo, b, tl.zeros_like(acc), input_precision="tf32")',
        '    part = tl.dot(a, b_lo, part, input_precision="tf32")',
        '    acc += tl.dot(a, b, part, input_precision="tf32")',
        "else:",
        f"    {one}",
    ]


def _gemm_body(kernel: GemmKernel, input_precision: str | None, presplit: bool) -> list[str]:
    """Grouped tiles on tensor cores, up to the accumulator `acc`."""
    a, b = kernel.a, kernel.b
    return [
        "pid = tl.program_id(0)",
        "bid = tl.program_id(1)",
        f"num_m = tl.cdiv({kernel.m}, BLOCK_M)",
        f"num_n = tl.cdiv({kernel.n}, BLOCK_N)",
        "per_group = GROUP_M * num_n",
        "first_m = (pid // per_group) * GROUP_M",
        "size_m = min(num_m - first_m, GROUP_M)",
        "pid_m = first_m + (pid % per_group) % size_m",
        "pid_n = (pid % per_group) // size_m",
        "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "rk = tl.arange(0, BLOCK_K)",
        f"am = rm % {kernel.m}",
        f"bn = rn % {kernel.n}",
        f"a_ptr = {a.arg} + bid * {a.strides[0]} + am[:, None] * {a.strides[1]}"
        f" + rk[None, :] * {a.strides[2]}",
        f"b_ptr = {b.arg} + bid * {b.strides[0]} + rk[:, None] * {b.strides[1]}"
        f" + bn[None, :] * {b.strides[2]}",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        *_k_loop(kernel, input_precision, presplit),
    ]


def _k_step(kernel: GemmKernel, input_precision: str | None, presplit: bool, masked: bool):
    """One K block: the operand tiles, their products, the pointers moved on."""
    masks = (", mask=kmask[None, :], other=0.0", ", mask=kmask[:, None], other=0.0")
    masks = masks if masked else ("", "")
    return [
        *(["kmask = rk < k_end - kk * BLOCK_K"] if masked else []),
        f"a = tl.load(a_ptr{masks[0]})",
        f"b = tl.load(b_ptr{masks[1]})",
        *_products(kernel, input_precision, presplit, masks),
        f"a_ptr += BLOCK_K * {kernel.a.strides[2]}",
        f"b_ptr += BLOCK_K * {kernel.b.strides[1]}",
    ]


def _k_loop(kernel: GemmKernel, input_precision: str | None, presplit: bool) -> list[str]:
    """The K loop, each block masked at K's end. A K that is no multiple of 4 (level1/8's
    2949) leaves the mask's value constant over no group of 4, so Triton loaded every element
    on its own; there the whole blocks run unmasked and the last, partial one after them."""
    step = _k_step(kernel, input_precision, presplit, masked=True)
    if kernel.k % ALIGN == 0 or kernel.split_k > 1:
        return [*_k_range(kernel), *_indent(step)]
    whole = _k_step(kernel, input_precision, presplit, masked=False)
    return [
        f"k_end = {kernel.k}",
        f"for kk in range(0, {kernel.k} // BLOCK_K):",
        *_indent(whole),
        f"if {kernel.k} % BLOCK_K != 0:",
        *_indent([f"kk = {kernel.k} // BLOCK_K", *step]),
    ]
