"""The Triton backend of the builtin model: tunables, default configs from the shapes, launches.

On a GPU the defaults follow the Triton tutorials' rules of thumb; under the Triton interpreter
(CPU) they minimise program instances (each costs about a millisecond), and there is nothing to
tune because interpreter timings mean nothing.

Each kernel type is one Family in FAMILIES: its default config, tunables, source and launch.
Pointwise and row kernels' (FusedKernel's) are in tools/builtin/triton_fused.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelgraph.tools.builtin import (
    tf32_copies,
    triton_attention,
    triton_conv,
    triton_conv_direct,
    triton_emit,
    triton_fused,
    triton_gemm,
    triton_gemv,
    triton_pool,
    triton_resident,
    triton_rows,
    triton_scan,
)
from kernelgraph.tools.builtin.attention import AttentionKernel
from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.kernels import (
    FusedKernel,
    GemmKernel,
    PartialReduction,
    family_of,
    next_pow2,
)
from kernelgraph.tools.builtin.pooling import PoolKernel
from kernelgraph.tools.builtin.scans import ScanKernel
from kernelgraph.tools.builtin.triton_fused import (
    INTERPRETER_BLOCK,
    MAX_PERSISTENT_R,
    SMS,
    strided_persistent,
)
from kernelgraph.tools.builtin.triton_gemm import GEMM_DOTS

# Rows this long are split across programs even when there are many (H200, group norm over
# [112, 64, 512, 512] in 8 groups: 6.35 ms one program a group, 5.53 split)
SPLIT_R = 1 << 19
# Convolutions at fp32 are judged against cuDNN with PyTorch's default flags, TF32 on: one TF32
# product with operands rounded to nearest as cuDNN's kernel rounds them (ties to even,
# "tf32rn", or away, "tf32rna": triton_conv.cudnn_roundings) reproduces that reference; tf32x3
# and IEEE (GEMM_DOTS) serve the convolutions cuDNN runs without TF32, and `ieee` runs; where
# those have few taps, exact FMA outer products ("fma", triton_conv_direct.fma_taps) come first.

Config = dict[str, Any]
Tunables = dict[str, list[Any]]
Launch = Callable[[Any, list[str], Config], list[str]]


@dataclass(frozen=True)
class Family:
    """What the backend does with one kernel type: its default config and tunables (from the
    backend's device and precision), its source for a config, and its launch lines."""

    default: Callable[[TritonBackend, Any], Config]
    tunables: Callable[[TritonBackend, Any], Tunables]
    source: Callable[[TritonBackend, Any, Config], str]
    launch: Launch
    # whether a config can compile at all (a GEMM's shared memory), so tuning never tries one
    # that cannot
    fits: Callable[[Any, Config], bool] = lambda kernel, config: True


def _launch_over(grid: Callable[[Any, Config], str], **defaults: Any) -> Launch:
    """`kernel[grid](*args, **config)`, `defaults` filling values that older configs lack; a
    config holding rows resident launches as triton_resident lays it out."""

    def launch(kernel, args: list[str], config: Config) -> list[str]:
        if config.get("RESIDENT"):
            return triton_resident.launch(kernel, args, config)
        config = {**defaults, **config}
        options = ", ".join(f"{k}={v!r}" for k, v in config.items())
        return [f"{kernel.name}[{grid(kernel, config)}]({', '.join(args)}, {options})"]

    return launch


def _with_gpu(fn: Callable) -> Callable:
    """A module's `fn(kernel, gpu)` as a family's `(backend, kernel[, config])`."""
    return lambda backend, kernel, *config: fn(kernel, backend.gpu)


def _attention_default(backend: TritonBackend, kernel: AttentionKernel) -> Config:
    return triton_attention.default(kernel, backend.gpu, backend._gemm_dots())


def _attention_tunables(backend: TritonBackend, kernel: AttentionKernel) -> Tunables:
    return triton_attention.tunables(kernel, backend.gpu, backend._gemm_dots())


def _attention_source(backend: TritonBackend, kernel: AttentionKernel, config: Config) -> str:
    return triton_attention.attention_source(kernel, backend.gpu, backend._dot())


def _conv_default(backend: TritonBackend, kernel: ConvKernel) -> Config:
    return triton_conv.default(kernel, backend.gpu, backend._conv_dots(kernel)[:1])


def _conv_tunables(backend: TritonBackend, kernel: ConvKernel) -> Tunables:
    return triton_conv.tunables(kernel, backend.gpu, backend._conv_dots(kernel, fastest=True))


def _conv_source(backend: TritonBackend, kernel: ConvKernel, config: Config) -> str:
    return triton_conv.conv_source(kernel, backend.gpu, backend._dot(), config)


def _partial_blocks(kernel: PartialReduction, block_r: int) -> int:
    """Chunks a split-row program reduces: enough programs to fill the GPU 16 times over, at
    most 64 chunks each. One chunk a program made 262144 fp64 atomics on one address for a
    mean over 2^30 elements (level1/94-style MSE)."""
    chunks = kernel.rows * -(-kernel.rlen // block_r)
    blocks = 1
    while blocks < 64 and chunks // (blocks * 2) >= 16 * SMS:
        blocks *= 2
    return blocks


def _partial_default(backend: TritonBackend, kernel: PartialReduction) -> Config:
    if not backend.gpu:
        return {"BLOCKS": 1, "BLOCK_R": min(next_pow2(kernel.rlen), INTERPRETER_BLOCK),
                "num_warps": 1}  # fmt: skip
    return {"BLOCKS": _partial_blocks(kernel, 4096), "BLOCK_R": 4096, "num_warps": 8}


def _partial_tunables(backend: TritonBackend, kernel: PartialReduction) -> Tunables:
    if not backend.gpu:
        return {}
    return {"BLOCKS": [1, 16, 64], "BLOCK_R": [2048, 4096, 8192], "num_warps": [4, 8, 16]}


def _partial_source(backend: TritonBackend, kernel: PartialReduction, config: Config) -> str:
    return triton_rows.partial_source(kernel, backend.gpu)


def _partial_grid(kernel: PartialReduction, config: Config) -> str:
    span = config["BLOCKS"] * config["BLOCK_R"]
    return f"(triton.cdiv({kernel.rlen}, {span}), {kernel.rows})"


def _gemm_default(backend: TritonBackend, kernel: GemmKernel) -> Config:
    return triton_gemm.default(kernel, backend.gpu, backend.precision, backend.fp32)


def _gemm_tunables(backend: TritonBackend, kernel: GemmKernel) -> Tunables:
    return triton_gemm.tunables(kernel, backend.gpu, backend.fp32)


def _gemm_source(backend: TritonBackend, kernel: GemmKernel, config: Config) -> str:
    return triton_gemm.gemm_source(kernel, backend.gpu, backend._dot())


def _fused_default(backend: TritonBackend, kernel: FusedKernel) -> Config:
    return triton_fused.default(kernel, backend.gpu)


def _fused_tunables(backend: TritonBackend, kernel: FusedKernel) -> Tunables:
    return triton_fused.tunables(kernel, backend.gpu)


def _fused_source(backend: TritonBackend, kernel: FusedKernel, config: Config) -> str:
    return triton_fused.fused_source(kernel, backend.gpu, config)


FAMILIES: dict[type, Family] = {
    FusedKernel: Family(_fused_default, _fused_tunables, _fused_source,
                        _launch_over(triton_fused.grid)),
    GemmKernel: Family(_gemm_default, _gemm_tunables, _gemm_source, triton_gemm.launch,
                       triton_gemm.fits),
    # configs from before BLOCKS read one chunk
    PartialReduction: Family(_partial_default, _partial_tunables, _partial_source,
                             _launch_over(_partial_grid, BLOCKS=1)),
    PoolKernel: Family(_with_gpu(triton_pool.default), _with_gpu(triton_pool.tunables),
                       _with_gpu(triton_pool.pool_source), triton_pool.launch),
    ScanKernel: Family(_with_gpu(triton_scan.default), _with_gpu(triton_scan.tunables),
                       _with_gpu(triton_scan.scan_source), triton_scan.launch),
    ConvKernel: Family(_conv_default, _conv_tunables, _conv_source, triton_conv.launch),
    AttentionKernel: Family(_attention_default, _attention_tunables, _attention_source,
                            triton_attention.launch),
}  # fmt: skip


def _family(kernel) -> Family:
    return family_of(FAMILIES, kernel, "Triton")


class TritonBackend:
    dsl = "triton"
    prelude = triton_emit.PRELUDE
    helpers = {**triton_emit.HELPERS, **tf32_copies.HELPERS, **triton_resident.HELPERS}
    kernel_kinds = tuple(FAMILIES)

    def __init__(self, device: str, precision: str) -> None:
        self.gpu = device.startswith("cuda")
        self.precision = precision
        self.fp32 = precision in ("fp32", "ieee")  # DOT is tuned: tf32x3 or IEEE for GEMMs
        # fp32 products on tensor cores (tf32x3, tf32) want both operands K-major
        self.k_major_operands = self.gpu and precision in ("fp32", "ieee", "tf32")

    # ------------------------------------------------------------ splitting (tools/builtin/split.py)

    def loops_rows(self, kernel: FusedKernel) -> bool:
        """Whether the default config reads this kernel's rows in a loop (or splits them), so
        a variance's second read costs a pass over memory (tools/builtin/shifted.py)."""
        if not self.gpu or not kernel.reductions:
            return False
        if kernel.inner > 1:
            return not strided_persistent(kernel)
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

    # ------------------------------------------------------------ configs

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
        return _family(kernel).default(self, kernel)

    def tunables(self, kernel: FusedKernel | GemmKernel) -> dict[str, list[Any]]:
        """Values the refine edge may try, per parameter (empty under the interpreter)."""
        return _family(kernel).tunables(self, kernel)

    def fits(self, kernel, config: dict[str, Any]) -> bool:
        return _family(kernel).fits(kernel, config)

    # ------------------------------------------------------------ source

    def kernel_source(self, kernel, config: dict[str, Any]) -> str:
        return _family(kernel).source(self, kernel, config)

    def fresh_outputs(self, outputs: list[tuple[str, int]]) -> list[str]:
        """Device memory needs nothing after allocation."""
        return []

    def launch(self, kernel, args: list[str], config: dict[str, Any]) -> list[str]:
        return _family(kernel).launch(kernel, args, config)
