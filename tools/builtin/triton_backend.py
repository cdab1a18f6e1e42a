"""The Triton backend of the builtin model: tunables, default configs from the shapes, launches.

On a GPU the defaults follow the Triton tutorials' rules of thumb; under the Triton interpreter
(CPU) they minimise program instances (each costs about a millisecond), and there is nothing to
tune because interpreter timings mean nothing.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin import (
    tf32_copies,
    triton_attention,
    triton_conv,
    triton_conv_direct,
    triton_emit,
    triton_gemv,
    triton_pool,
    triton_resident,
    triton_rows,
    triton_scan,
)
from kernelgraph.tools.builtin.attention import AttentionKernel
from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.expr import loads
from kernelgraph.tools.builtin.kernels import (
    FusedKernel,
    GemmKernel,
    PartialReduction,
    next_pow2,
)
from kernelgraph.tools.builtin.pooling import PoolKernel
from kernelgraph.tools.builtin.scans import ScanKernel

SMS = 132  # streaming multiprocessors of an H100 SXM: "too few programs" is relative to this
MAX_PERSISTENT_R = 32768  # longer rows loop: softmax's max and sum online, in one pass
STREAM_BLOCK_R = 4096  # a looped one-pass row's block: 16 fp32 of each input a thread
LOOPED_BLOCK_R = 16384  # a looped row's block when it has one reduction (32 fp32 a thread)
INTERPRETER_BLOCK = 1 << 16
# Rows this long are split across programs even when there are many (H200, group norm over
# [112, 64, 512, 512] in 8 groups: 6.35 ms one program a group, 5.53 split)
SPLIT_R = 1 << 19
STRIDED_TILE = 16384  # elements of a strided persistent tile (BLOCK_K x BLOCK_R), H100 sweep
# fp32 products, fastest first: three TF32 tensor-core products per fp32 one (fp32-accurate,
# several times the FMA rate), then IEEE FMAs. torch's fp32 matmuls are IEEE at both precisions.
GEMM_DOTS = ("tf32x3", "ieee")
# Convolutions at fp32 are judged against cuDNN with PyTorch's default flags, TF32 on: one TF32
# product with operands rounded to nearest as cuDNN's kernel rounds them (ties to even,
# "tf32rn", or away, "tf32rna": triton_conv.cudnn_roundings) reproduces that reference; tf32x3
# and IEEE (GEMM_DOTS) serve the convolutions cuDNN runs without TF32, and `ieee` runs; where
# those have few taps, exact FMA outer products ("fma", triton_conv_direct.fma_taps) come first.


def _strided_persistent(kernel: FusedKernel) -> bool:
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
    return {"BLOCK_K": min(next_pow2(kernel.rows), 64), "BLOCK_R": block_r, "num_warps": 4}


def _partial_blocks(kernel: PartialReduction, block_r: int) -> int:
    """Chunks a split-row program reduces: enough programs to fill the GPU 16 times over, at
    most 64 chunks each. One chunk a program made 262144 fp64 atomics on one address for a
    mean over 2^30 elements (level1/94-style MSE)."""
    chunks = kernel.rows * -(-kernel.rlen // block_r)
    blocks = 1
    while blocks < 64 and chunks // (blocks * 2) >= 16 * SMS:
        blocks *= 2
    return blocks


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


class TritonBackend:
    dsl = "triton"
    prelude = triton_emit.PRELUDE
    helpers = {**triton_emit.HELPERS, **tf32_copies.HELPERS, **triton_resident.HELPERS}
    kernel_kinds = (FusedKernel, GemmKernel, PartialReduction, PoolKernel, ScanKernel, ConvKernel,
                    AttentionKernel)  # fmt: skip

    def __init__(self, device: str, precision: str) -> None:
        self.gpu = device.startswith("cuda")
        self.precision = precision
        self.fp32 = precision in ("fp32", "ieee")  # DOT is tuned: tf32x3 or IEEE for GEMMs
        # fp32 products on tensor cores (tf32x3, tf32) want both operands K-major
        self.k_major_operands = self.gpu and precision in ("fp32", "ieee", "tf32")

    # ------------------------------------------------------------ configs

    # ------------------------------------------------------------ splitting (tools/builtin/split.py)

    def loops_rows(self, kernel: FusedKernel) -> bool:
        """Whether the default config reads this kernel's rows in a loop (or splits them), so
        a variance's second read costs a pass over memory (tools/builtin/shifted.py)."""
        if not self.gpu or not kernel.reductions:
            return False
        if kernel.inner > 1:
            return not _strided_persistent(kernel)
        return kernel.rlen > MAX_PERSISTENT_R

    def split_rows(self, kernel: FusedKernel) -> bool:
        """Too few rows to fill the GPU, or rows of megabytes that no program set holds
        (group norm's 8 MB groups): a program per row would loop over one for milliseconds."""
        if not self.gpu or kernel.rlen < 32768:
            return False
        if kernel.rows < 2 * SMS:
            return True
        return (
            kernel.inner == 1
            and kernel.rlen >= SPLIT_R
            and not triton_resident.fits(kernel, SMS)
            and not kernel.online_pairs()  # a split reads online softmax's row once more
        )

    def split_k(self, kernel: GemmKernel) -> int:
        if not self.gpu:
            return 1
        if triton_gemv.is_gemv(kernel):
            return triton_gemv.split_k(kernel, SMS)
        tiles = -(-kernel.m // 128) * -(-kernel.n // 128) * kernel.batch
        if tiles >= SMS or kernel.k < 8192:
            return 1
        return max(1, min(-(-2 * SMS // tiles), kernel.k // 2048))

    def _dot(self) -> str | None:
        """tl.dot's input precision as Python source: the DOT tuning parameter at fp32."""
        return "DOT" if self.fp32 else {"tf32": '"tf32"'}.get(self.precision)

    def _conv_dots(self, kernel: ConvKernel, fastest: bool = False) -> tuple[str, ...]:
        """The DOT values a convolution may use (none when DOT is not tuned): the first to try
        first, or with `fastest`, fastest first (the order the search ranks them in)."""
        if not self.fp32:
            return ()
        if not self.gpu or self.precision == "ieee":
            return GEMM_DOTS  # cuDNN's flags: GPU only
        roundings = triton_conv.cudnn_roundings(kernel)
        if not triton_conv.cudnn_skips_tf32(kernel):
            return (*roundings, *GEMM_DOTS)
        if triton_conv_direct.fma_applies(kernel):  # exact and fastest where it applies
            fma = triton_conv_direct.FMA
            return (*roundings, fma, *GEMM_DOTS) if fastest else (fma, *roundings, *GEMM_DOTS)
        if fastest or kernel.averaged:  # its TF32 error is averaged away downstream
            return (*roundings, *GEMM_DOTS)
        return (GEMM_DOTS[0], *roundings, GEMM_DOTS[1])

    def _gemm_dots(self) -> tuple[str, ...]:
        return GEMM_DOTS if self.fp32 else ()

    def default(self, kernel) -> dict[str, Any]:
        if isinstance(kernel, AttentionKernel):
            return triton_attention.default(kernel, self.gpu, self._gemm_dots())
        if isinstance(kernel, ConvKernel):
            return triton_conv.default(kernel, self.gpu, self._conv_dots(kernel)[:1])
        if isinstance(kernel, ScanKernel):
            return triton_scan.default(kernel, self.gpu)
        if isinstance(kernel, PoolKernel):
            return triton_pool.default(kernel, self.gpu)
        if isinstance(kernel, PartialReduction):
            if not self.gpu:
                return {"BLOCKS": 1, "BLOCK_R": min(next_pow2(kernel.rlen), INTERPRETER_BLOCK),
                        "num_warps": 1}  # fmt: skip
            return {"BLOCKS": _partial_blocks(kernel, 4096), "BLOCK_R": 4096, "num_warps": 8}
        if isinstance(kernel, GemmKernel):
            return self._gemm_default(kernel)
        if kernel.is_pointwise():
            if not self.gpu:
                return {"BLOCK": min(next_pow2(kernel.numel), INTERPRETER_BLOCK), "num_warps": 1}
            return {"BLOCK": 1024, "num_warps": 4}
        if not self.gpu:
            block_r = min(next_pow2(kernel.rlen), INTERPRETER_BLOCK)
            block_k = max(1, min(next_pow2(kernel.rows), INTERPRETER_BLOCK // block_r))
            return {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": 1}
        if kernel.inner > 1:  # rows are strided: tile along the contiguous inner axis
            if _strided_persistent(kernel):
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

    def _gemm_default(self, kernel: GemmKernel) -> dict[str, Any]:
        if triton_gemv.is_gemv(kernel):
            return triton_gemv.default(kernel, self.gpu)
        dot = {"DOT": GEMM_DOTS[0]} if self.fp32 else {}
        if not self.gpu:
            return {"BLOCK_M": min(next_pow2(kernel.m), 64), "BLOCK_N": min(next_pow2(kernel.n), 64),
                    "BLOCK_K": min(next_pow2(kernel.k), 64), "GROUP_M": 8, **dot, "num_warps": 1,
                    "num_stages": 1}  # fmt: skip
        wide = self.precision in ("fp16", "bf16")
        # split-K (K >> M, N): 64-deep fp32 blocks, 1.78 ms against 1.95 at 32 (level1/6, H200)
        deep = wide or kernel.split_k > 1
        return {"BLOCK_M": 128, "BLOCK_N": 256 if wide else 128, "BLOCK_K": 64 if deep else 32,
                "GROUP_M": 8, **dot, "num_warps": 8, "num_stages": 3}  # fmt: skip

    def tunables(self, kernel: FusedKernel | GemmKernel) -> dict[str, list[Any]]:
        """Values the refine edge may try, per parameter (empty under the interpreter)."""
        if isinstance(kernel, AttentionKernel):
            return triton_attention.tunables(kernel, self.gpu, self._gemm_dots())
        if isinstance(kernel, ConvKernel):
            return triton_conv.tunables(kernel, self.gpu, self._conv_dots(kernel, fastest=True))
        if isinstance(kernel, ScanKernel):
            return triton_scan.tunables(kernel, self.gpu)
        if isinstance(kernel, PoolKernel):
            return triton_pool.tunables(kernel, self.gpu)
        if not self.gpu:
            return {}
        if isinstance(kernel, PartialReduction):
            return {"BLOCKS": [1, 16, 64], "BLOCK_R": [2048, 4096, 8192], "num_warps": [4, 8, 16]}
        if isinstance(kernel, GemmKernel) and triton_gemv.is_gemv(kernel):
            return triton_gemv.tunables(kernel)
        if isinstance(kernel, GemmKernel):
            dot = {"DOT": list(GEMM_DOTS)} if self.fp32 else {}
            return {**dot, "BLOCK_M": [64, 128], "BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64],
                    "num_warps": [4, 8], "num_stages": [3, 4, 5]}  # fmt: skip
        if kernel.is_pointwise():
            return {"BLOCK": [512, 1024, 2048, 4096], "num_warps": [2, 4, 8]}
        if kernel.inner > 1 and _strided_persistent(kernel):
            block_r = next_pow2(kernel.rlen)
            ks = [k for k in (16, 32, 64, 128) if k * block_r <= 2 * STRIDED_TILE]
            return {"BLOCK_K": ks, "num_warps": [4, 8, 16]}
        if kernel.inner > 1:
            return {"BLOCK_K": [32, 64, 128], "BLOCK_R": [8, 16, 32, 64], "num_warps": [4, 8]}
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

    # ------------------------------------------------------------ source

    def kernel_source(self, kernel, config: dict[str, Any]) -> str:
        if isinstance(kernel, AttentionKernel):
            return triton_attention.attention_source(kernel, self.gpu, self._dot())
        if isinstance(kernel, ConvKernel):
            return triton_conv.conv_source(kernel, self.gpu, self._dot(), config)
        if isinstance(kernel, ScanKernel):
            return triton_scan.scan_source(kernel, self.gpu)
        if isinstance(kernel, PoolKernel):
            return triton_pool.pool_source(kernel, self.gpu)
        if isinstance(kernel, PartialReduction):
            return triton_rows.partial_source(kernel, self.gpu)
        if isinstance(kernel, GemmKernel):
            return triton_emit.gemm_source(kernel, self.gpu, self._dot())
        if kernel.is_pointwise():
            return triton_emit.pointwise_source(kernel, self.gpu)
        if config.get("RESIDENT"):
            return triton_resident.resident_source(kernel, self.gpu, config["BLOCK_R"])
        persistent = config["BLOCK_R"] >= kernel.rlen
        return triton_rows.row_source(kernel, self.gpu, persistent)

    def fresh_outputs(self, outputs: list[tuple[str, int]]) -> list[str]:
        """Device memory needs nothing after allocation."""
        return []

    def launch(self, kernel, args: list[str], config: dict[str, Any]) -> list[str]:
        if isinstance(kernel, AttentionKernel):
            return triton_attention.launch(kernel, args, config)
        if isinstance(kernel, ConvKernel):
            return triton_conv.launch(kernel, args, config)
        if isinstance(kernel, ScanKernel):
            return triton_scan.launch(kernel, args, config)
        if isinstance(kernel, PoolKernel):
            return triton_pool.launch(kernel, args, config)
        if config.get("RESIDENT"):
            return triton_resident.launch(kernel, args, config)
        if isinstance(kernel, PartialReduction):
            config = {"BLOCKS": 1, **config}  # configs from before BLOCKS read one chunk
            span = config["BLOCKS"] * config["BLOCK_R"]
            grid = f"(triton.cdiv({kernel.rlen}, {span}), {kernel.rows})"
        elif isinstance(kernel, GemmKernel):
            grid = (
                f"(triton.cdiv({kernel.m}, {config['BLOCK_M']}) * "
                f"triton.cdiv({kernel.n}, {config['BLOCK_N']}), {kernel.batch}, {kernel.split_k})"
            )
        elif kernel.is_pointwise():
            grid = triton_emit.pointwise_grid(kernel, config["BLOCK"])
        else:
            grid = f"(triton.cdiv({kernel.rows}, {config['BLOCK_K']}),)"
        options = ", ".join(f"{k}={v!r}" for k, v in config.items())
        return [f"{kernel.name}[{grid}]({', '.join(args)}, {options})"]
