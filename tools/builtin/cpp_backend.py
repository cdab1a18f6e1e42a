"""The C++ (OpenMP, CPU) backend of the builtin model: tunables, default configs, launches.

The kernel file is standalone (no kernelgraph import): each kernel is C++ source in a Python
string, inside a namespace of its own, and all of a file's kernels are built together by
`torch.utils.cpp_extension.load_inline(..., no_implicit_headers=True)` with Python C API bindings
written here at generation time (tools/dsl/cpp_bindings.py); torch caches the build by name and
source. Tuning values are run-time arguments of the C functions, so a config change is not a
rebuild: a launch is `_lib.k0_name(inputs.data_ptr()..., outputs.data_ptr()..., threads, ...)`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelgraph.tools.builtin import cpp_emit, cpp_gemm, cpp_pool, cpp_rows, cpp_scan
from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.kernels import FusedKernel, GemmKernel, PartialReduction, family_of
from kernelgraph.tools.builtin.pooling import PoolKernel
from kernelgraph.tools.builtin.scans import ScanKernel
from kernelgraph.tools.dsl.cpp_bindings import OPT_FLAGS, binding_module, extension_name

HELPERS = r"""#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>
#include <omp.h>
#include <sys/mman.h>

// log(exp(a) + exp(b)) in double from the larger (logcumsumexp's step): -inf, inf and NaN exact
static inline double kg_logaddexp(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return a + b;
    const double hi = std::max(a, b), lo = std::min(a, b);
    if (lo == -INFINITY || hi == INFINITY) return hi;
    return hi + std::log1p(std::exp(lo - hi));
}

// exp(x) with plain float arithmetic (vectorises): 2^k * poly(r), relative error ~1e-7. 2^k is
// applied as two halves so that k from -150 (subnormal results) to 128 stays representable.
static inline float kg_exp(float x) {
    const float c = std::min(std::max(x, -104.0f), 88.7228317f);  // NaN stays NaN
    const float k = (c * 1.44269504f + 12582912.0f) - 12582912.0f;
    const float r = (c - k * 0.693359375f) + k * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t ki = static_cast<int32_t>(k), half = ki >> 1;
    float e = p * __builtin_bit_cast(float, (half + 127) << 23);
    e *= __builtin_bit_cast(float, (ki - half + 127) << 23);
    e = x > 88.7228317f ? INFINITY : e;
    return x < -104.0f ? 0.0f : e;
}
static inline float kg_sigmoid(float x) { return 1.0f / (1.0f + kg_exp(-x)); }
static inline float kg_tanh(float x) {
    const float e = kg_exp(-2.0f * std::fabs(x));
    const float t = (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : t;
}
// log(x) with plain float arithmetic (vectorises): x = m 2^e, m in [sqrt(1/2), sqrt(2)), and
// log(m) from Cephes' logf polynomial; subnormals are scaled up first. About 1 ulp. Both arms
// of every select are computed first: a conditional float op would keep a branch in the loop.
static inline float kg_log(float x) {
    const bool tiny = x < 1.17549435e-38f;
    const float scaled = x * 8388608.0f;
    const int32_t bits = __builtin_bit_cast(int32_t, tiny ? scaled : x);
    const float m0 = __builtin_bit_cast(float, (bits & 0x007fffff) | 0x3f000000);  // [0.5, 1)
    const bool low = m0 < 0.707106781f;
    const float doubled = m0 + m0 - 1.0f, m = low ? doubled : m0 - 1.0f;
    const float fe = static_cast<float>(((bits >> 23) & 0xff) - 126) - (tiny ? 23.0f : 0.0f)
                     - (low ? 1.0f : 0.0f);  // float selects: mixed-width ones stop vectorising
    const float z = m * m;
    float p = 7.0376836292e-2f;
    p = p * m - 1.1514610310e-1f;
    p = p * m + 1.1676998740e-1f;
    p = p * m - 1.2420140846e-1f;
    p = p * m + 1.4249322787e-1f;
    p = p * m - 1.6668057665e-1f;
    p = p * m + 2.0000714765e-1f;
    p = p * m - 2.4999993993e-1f;
    p = p * m + 3.3333331174e-1f;
    float y = (m + (p * m * z - 2.12194440e-4f * fe - 0.5f * z)) + 0.693359375f * fe;
    y += x - x;  // NaN in, NaN out (as arithmetic: a NaN test here stops vectorising log(exp))
    y = x == INFINITY ? INFINITY : y;
    y = x == 0.0f ? -INFINITY : y;
    return x < 0.0f ? NAN : y;
}
// log1p(x) = log(u) * x / (u - 1), u = 1 + x: the quotient cancels u's rounding (Goldberg).
static inline float kg_log1p(float x) {
    const float u = 1.0f + x, d = u - 1.0f, y = kg_log(u) * (x / d);  // no branch: vectorises
    return d == 0.0f ? x : u == INFINITY ? INFINITY : y;
}
// expm1(x) = (u - 1) * x / log(u), u = exp(x): the same correction near 0 (Kahan).
static inline float kg_expm1(float x) {
    const float u = kg_exp(x), d = u - 1.0f;
    float y = d * (x / kg_log(u));
    y = u == 1.0f ? x : y;
    y = d == -1.0f ? -1.0f : y;
    return u == INFINITY ? INFINITY : y;
}
// Abramowitz & Stegun 7.1.26: absolute error below 1.5e-7.
static inline float kg_erf(float x) {
    const float a = std::fabs(x), t = 1.0f / (1.0f + 0.3275911f * a);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    const float y = 1.0f - p * t * kg_exp(-a * a);
    return x < 0.0f ? -y : y;
}
// An output whose dtype is only known at run time (dt: 0 float32, 1 int64, 2 bool).
template <class T> static inline void kg_store(void* p, int64_t i, int64_t dt, T v) {
    if (dt == 1) static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
    else if (dt == 2) static_cast<bool*>(p)[i] = v != 0;
    else static_cast<float*>(p)[i] = static_cast<float>(v);
}
// GCC vectorises for 256-bit registers even where the machine has 512-bit ones; contiguous row
// kernels ask for the wide ones: the README's softmax (512 x 1024, rows of exp) took 0.25 ms at
// 2 threads, 0.32 with 256-bit vectors (a 2-core AVX-512 Xeon, standalone, 3 rounds). Pragmas,
// not a target attribute: C++ would take a later plain declaration for another version.
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define KG_WIDE_VECTORS_BEGIN _Pragma("GCC push_options") \
    _Pragma("GCC target(\"prefer-vector-width=512\")")
#define KG_WIDE_VECTORS_END _Pragma("GCC pop_options")
#else
#define KG_WIDE_VECTORS_BEGIN
#define KG_WIDE_VECTORS_END
#endif
// Threads for a launch: `t` (0: all), never more than the process allows (the harness's limit).
static inline int kg_threads(int64_t t) {
    const int most = omp_get_max_threads();
    return t > 0 && t < most ? static_cast<int>(t) : most;
}
// A fresh output of many MiB is untouched memory that its first writes fault in 4 KiB at a
// time, which can cost more than the kernel itself. Asking for 2 MiB pages (Linux's THP on
// request) takes 512 times fewer faults. Advice only: where it is refused nothing changes.
extern "C" void kg_huge_pages(void* p, int64_t bytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = uintptr_t(1) << 21, at = reinterpret_cast<uintptr_t>(p);
    const uintptr_t start = (at + huge - 1) & ~(huge - 1), end = (at + bytes) & ~(huge - 1);
    if (end > start) madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE);
#endif
}
"""

# -fno-math-errno -fno-trapping-math: let sqrt, floor, round and the selects around float ops
# vectorise; results are unchanged.
CFLAGS = [*OPT_FLAGS, "-fno-math-errno", "-fno-trapping-math"]

PRELUDE = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_HELPERS = r"""{HELPERS}"""
# -fno-math-errno -fno-trapping-math: let sqrt, floor, round and the selects around float ops
# vectorise; results are unchanged.
_CFLAGS = {CFLAGS!r}


def _dtype_code(t):
    return 1 if t.dtype == torch.int64 else 2 if t.dtype == torch.bool else 0


def _floats(*tensors):
    """Kernel inputs as the C functions read them (float*): bool and integer ones converted."""
    return [t if t.is_floating_point() else t.float() for t in tensors]
'''

PARALLEL_MIN = 1 << 15  # elements below which one thread beats starting the team
HUGE_PAGES_MIN = 4 << 20  # bytes of an output from which it asks for huge pages (kg_huge_pages)


def _cores() -> int:
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return max(len(usable) if usable else os.cpu_count() or 1, 1)


def _thread_choices() -> list[int]:
    """0 (every core, the defaults' choice), one thread and half the cores, but never a count
    that means every core again (refine would time the same launch twice)."""
    cores = _cores()
    return sorted({0} | {t for t in (1, cores // 2) if 0 < t < cores})


Config = dict[str, Any]
Tunables = dict[str, list[Any]]


@dataclass(frozen=True)
class Family:
    """What the backend does with one kernel type: the C function's tuning arguments, its
    default config and tunables, its C++ source, and its outputs whose dtype comes at run time."""

    params: Callable[[Any], list[str]]
    default: Callable[[Any], Config]
    tunables: Callable[[Any], Tunables]
    source: Callable[[Any], str]
    dynamic: Callable[[Any], set[str]]


def _threads_only(kernel) -> list[str]:
    return ["threads"]


def _threads_tunables(kernel) -> Tunables:
    return {"threads": _thread_choices()}


def _scan_default(kernel: ScanKernel) -> Config:
    return cpp_scan.default(kernel, PARALLEL_MIN)


def _scan_tunables(kernel: ScanKernel) -> Tunables:
    return cpp_scan.tunables(kernel, _thread_choices())


def _no_dynamic_outputs(kernel: ScanKernel) -> set[str]:
    return set()


def _pool_default(kernel: PoolKernel) -> Config:
    return {"threads": 1 if kernel.numel * kernel.window_numel < PARALLEL_MIN else 0}


def _pool_dynamic(kernel: PoolKernel) -> set[str]:
    return cpp_emit.dynamic_outputs(kernel.stores, {"arg"})


def _gemm_params(kernel: GemmKernel) -> list[str]:
    return list(cpp_gemm.PARAMS)


def _gemm_default(kernel: GemmKernel) -> dict[str, Any]:
    """96 x 256 x 256 tiles (the A and B blocks stay in L2), halved while there are fewer
    than four tiles per core (small products need the tiles to spread over the threads)."""
    block_m, block_n = 96, 256
    tiles = lambda bm, bn: kernel.batch * -(-kernel.m // bm) * -(-kernel.n // bn)  # noqa: E731
    while tiles(block_m, block_n) < 4 * _cores() and (block_n > 64 or block_m > 48):
        block_n, block_m = (block_n // 2, block_m) if block_n > 64 else (block_n, block_m // 2)
    small = kernel.batch * kernel.m * kernel.n * kernel.k < (1 << 18)
    return {"threads": 1 if small else 0, "BLOCK_M": block_m, "BLOCK_N": block_n,
            "BLOCK_K": 256}  # fmt: skip


def _gemm_tunables(kernel: GemmKernel) -> Tunables:
    return {"threads": _thread_choices(), "BLOCK_M": [48, 96, 192], "BLOCK_N": [128, 256, 512],
            "BLOCK_K": [128, 256, 512]}  # fmt: skip


def _gemm_dynamic(kernel: GemmKernel) -> set[str]:
    return cpp_emit.dynamic_outputs(kernel.stores)


def _rows_params(kernel: FusedKernel) -> list[str]:
    if kernel.is_pointwise() or kernel.inner == 1:
        return ["threads"]
    return ["threads", "WIDTH"]


def _rows_default(kernel: FusedKernel) -> Config:
    threads = 1 if kernel.numel < PARALLEL_MIN else 0  # 0: all cores
    if kernel.is_pointwise() or kernel.inner == 1:
        return {"threads": threads}
    # strided rows: chunks of up to 256 contiguous rows, narrower until every core has two
    width = min(cpp_emit.MAX_WIDTH, _pow2_at_least(kernel.inner))
    while width > 16 and kernel.outer * -(-kernel.inner // width) < 2 * _cores():
        width //= 2
    return {"threads": threads, "WIDTH": width}


def _rows_tunables(kernel: FusedKernel) -> Tunables:
    threads = _thread_choices()
    if kernel.is_pointwise() or kernel.inner == 1:
        return {"threads": threads}
    return {"threads": threads, "WIDTH": [16, 32, 64, 128, 256]}


def _rows_source(kernel: FusedKernel) -> str:
    if kernel.is_pointwise():
        rows = cpp_emit.broadcast_rows(kernel)
        return cpp_rows.row_source(rows) if rows else cpp_emit.pointwise_source(kernel)
    return cpp_rows.row_source(kernel)


ROWS = Family(_rows_params, _rows_default, _rows_tunables, _rows_source, cpp_emit.fused_dynamic)
FAMILIES: dict[type, Family] = {
    FusedKernel: ROWS,
    GemmKernel: Family(_gemm_params, _gemm_default, _gemm_tunables, cpp_gemm.gemm_source,
                       _gemm_dynamic),
    # made only by a backend's split_rows (this one has none): kept as before, a row kernel
    PartialReduction: ROWS,
    PoolKernel: Family(_threads_only, _pool_default, _threads_tunables, cpp_pool.pool_source,
                       _pool_dynamic),
    ScanKernel: Family(cpp_scan.params, _scan_default, _scan_tunables, cpp_scan.scan_source,
                       _no_dynamic_outputs),
}  # fmt: skip


def _family(kernel) -> Family:
    return family_of(FAMILIES, kernel, "C++")


class CppBackend:
    dsl = "cpp"
    prelude = PRELUDE
    kernel_kinds = tuple(FAMILIES)

    def __init__(self, device: str, precision: str) -> None:
        if precision not in ("fp32", "ieee", "tf32"):
            raise Unsupported(
                f"{precision} C++ kernels", "the C++ backend computes and stores fp32"
            )
        self.device, self.precision = device, precision

    def loops_rows(self, kernel: FusedKernel) -> bool:
        """Rows too long for the sweeps' row cache are read from memory once per sweep, so a
        variance's second sweep costs a pass (tools/builtin/shifted.py)."""
        return bool(kernel.reductions) and kernel.rlen > cpp_rows.MAX_CACHED_ROW

    # ------------------------------------------------------------ configs

    def params(self, kernel: FusedKernel | GemmKernel) -> list[str]:
        """The C function's tuning arguments, in order."""
        return _family(kernel).params(kernel)

    def default(self, kernel: FusedKernel | GemmKernel) -> dict[str, Any]:
        return _family(kernel).default(kernel)

    def tunables(self, kernel: FusedKernel | GemmKernel) -> dict[str, list[Any]]:
        return _family(kernel).tunables(kernel)

    # ------------------------------------------------------------ source

    def kernel_source(self, kernel: FusedKernel | GemmKernel, config: dict[str, Any]) -> str:
        return f'_{kernel.name}_src = r"""\n{_c_source(kernel)}"""'

    def library(self, kernels: list[FusedKernel | GemmKernel]) -> str:
        """The file's one build: the helpers, every kernel's source, then the Python bindings."""
        sources = [_c_source(k) for k in kernels]
        name = extension_name("kg_builtin", HELPERS, *sources, CFLAGS, "python-c-api bindings")
        bindings = binding_module([HELPERS, *sources], name)  # kg_huge_pages is in the helpers
        names = ["_HELPERS", *(f"_{k.name}_src" for k in kernels), "_BINDINGS"]
        return "\n".join([
            f'_BINDINGS = r"""\n{bindings}"""',
            "# Built once by torch into TORCH_EXTENSIONS_DIR/<name>, cached by name and source;",
            "# the bindings take tensors as their data_ptr().",
            "_lib = load_inline(",
            f"    {name!r},",
            f"    cpp_sources=[{', '.join(names)}],",
            "    extra_cflags=_CFLAGS,",
            '    extra_ldflags=["-fopenmp"],',
            "    no_implicit_headers=True,",
            ")",
        ])  # fmt: skip

    def fresh_outputs(self, outputs: list[tuple[str, int]]) -> list[str]:
        """Lines after forward allocates (name, bytes) outputs: big ones ask for huge pages."""
        return [f"_lib.kg_huge_pages({name}.data_ptr(), {size})"
                for name, size in outputs if size >= HUGE_PAGES_MIN]  # fmt: skip

    def launch(self, kernel, args: list[str], config: dict[str, Any]) -> list[str]:
        """Tensors go as their data pointers, dynamic-dtype outputs with their dtype code."""
        dynamic = _family(kernel).dynamic(kernel)
        n_in = len(kernel.inputs)
        values = [f"_in[{i}].data_ptr()" for i in range(n_in)]  # _in keeps converted ones alive
        for name, arg in zip(kernel.outputs, args[n_in:], strict=True):
            values.append(f"{arg}.data_ptr()")
            if name in dynamic:
                values.append(f"_dtype_code({arg})")
        values += [str(int(config[p])) for p in self.params(kernel)]
        call = f"_lib.{kernel.name}({', '.join(values)})"
        return [f"_in = _floats({', '.join(args[:n_in])})", call] if n_in else [call]


def _c_source(kernel: FusedKernel | GemmKernel) -> str:
    """The kernel's C++ in a namespace of its own (its helpers and constants may repeat another
    kernel's in the same build), its `#include` lines first, outside it. The `extern "C"`
    function keeps C linkage, so the bindings reach it by its plain name."""
    return _namespaced(kernel, _family(kernel).source(kernel))


def _namespaced(kernel, source: str) -> str:
    lines = source.strip("\n").splitlines()
    includes = [line for line in lines if line.startswith("#include")]
    body = [line for line in lines if not line.startswith("#include")]
    space = f"kg_{kernel.name}"
    return "\n".join([*includes, f"namespace {space} {{", *body, f"}}  // namespace {space}", ""])


def _pow2_at_least(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()
