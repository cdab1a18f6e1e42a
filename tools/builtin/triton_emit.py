"""Triton source shared by the builtin's kernels, and its pointwise kernels and tiled GEMM.

One function per kernel kind, each in the shape of the Triton tutorials: program ids → offsets
→ masks → loads → math in fp32 → stores. Sizes are baked in as constants (the builtin
specialises to the task's shapes); block sizes and warps come from the tuning config.
"""

from __future__ import annotations

import math

from kernelgraph.tools.builtin import triton_gemv
from kernelgraph.tools.builtin.expr import Load, var, walk
from kernelgraph.tools.builtin.kernels import FusedKernel, GemmKernel
from kernelgraph.tools.builtin.printer import Printer, operator_or_call

INT32_LIMIT = 2**31 - 1
# A flat kernel reading an operand at idx % P with P at least this many elements (a layer
# norm's weight over 64 x 256 x 256) re-reads it once per repeat: between two reads of one
# block the other operands stream P elements each through L2 and evict it.
REUSED_PERIOD = 1 << 20
INIT = {"sum": "0.0", "prod": "1.0", "max": '-float("inf")', "min": 'float("inf")'}
COMBINE = {"sum": "{a} + {b}", "prod": "{a} * {b}", "max": "tl.maximum({a}, {b})",
           "min": "tl.minimum({a}, {b})"}  # fmt: skip
REDUCE = {"sum": "tl.sum({a}, axis=1)", "max": "tl.max({a}, axis=1)",
          "min": "tl.min({a}, axis=1)", "prod": "tl.reduce({a}, 1, _multiply)"}  # fmt: skip

PRELUDE = """import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice


@triton.jit
def _multiply(a, b):
    return a * b
"""


# jit helpers a kernel file gets only when one of its kernels calls them (name -> source)
HELPERS = {
    "_logaddexp": """@triton.jit
def _logaddexp(a, b):
    # log(exp(a) + exp(b)) from the larger: exact at -inf (both -inf stays -inf), inf and NaN
    hi = tl.maximum(a, b)
    lo = tl.minimum(a, b)
    out = tl.where((lo == -float("inf")) | (hi == float("inf")), hi, hi + tl.log(1.0 + tl.exp(lo - hi)))
    return tl.where((a != a) | (b != b), a + b, out)
""",
    "_log": """@triton.jit
def _log(x):
    # MUFU's lg2 (libdevice's fast_logf), not libdevice's logf polynomial, whose two logs an
    # element made a KL divergence compute-bound (level1/98, H200). fast_logf is within about
    # 2e-6 relative, except near 1, where its absolute error (1e-7) dwarfs log(x): there the
    # series of log1p(x - 1) to u^5 is exact to float. It flushes subnormals to zero, so they
    # are scaled by 2^24 into the normal range first.
    tiny = x < 1.1754943508222875e-38
    y = libdevice.fast_logf(tl.where(tiny, x * 16777216.0, x))
    y = tl.where(tiny, y - 16.635532333438686, y)
    u = x - 1.0
    near = u * (1.0 + u * (-0.5 + u * (0.3333333333333333 + u * (-0.25 + u * 0.2))))
    return tl.where(tl.abs(u) < 0.015625, near, y)
""",
    "_atan": """@triton.jit
def _atan(x):
    # Cephes' atanf: reduce |x| below tan(pi/8), then an odd polynomial (relative error ~1e-7)
    a = tl.abs(x)
    big = a > 2.414213562373095
    mid = (a > 0.4142135623730950) & (~big)
    t = tl.where(big, -1.0 / a, tl.where(mid, (a - 1.0) / (a + 1.0), a))
    base = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    z = t * t
    p = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
         - 3.33329491539e-1) * z * t + t
    return tl.where(x < 0, -(base + p), base + p)
""",
}


class TritonSyntax:
    index_symbols = {"idiv": "//", "imod": "%", "imul": "*", "iadd": "+"}

    def index_abs(self, x: str) -> str:
        return f"tl.abs({x})"

    def index_of(self, value: str) -> str:
        return f"{value}.to(tl.int32)"

    def __init__(self, gpu: bool) -> None:
        self.gpu = gpu

    def primitive(self, op: str, a: list[str]) -> str:
        calls = _GPU_CALLS if self.gpu else _CALLS  # the interpreter has no fast_logf
        if (text := operator_or_call(op, a, _BINARY, calls)) is not None:
            return text
        x = a[0]
        if op == "pow":
            return f"tl.exp({a[1]} * {calls['log']}({x}))"
        if self.gpu and op in ("tanh", "log1p", "expm1"):
            return f"libdevice.{op}({x})"
        return {
            "neg": f"(-{x})",
            "tanh": f"(2.0 * tl.sigmoid(2.0 * {x}) - 1.0)",
            "log1p": f"tl.log(1.0 + {x})",
            "expm1": f"(tl.exp({x}) - 1.0)",
            "round": f"libdevice.rint({x})",
            "trunc": f"tl.where({x} < 0, tl.ceil({x}), tl.floor({x}))",
            "not": f"({x} == 0)",
            "isnan": f"({x} != {x})",
            "to_float": f"{x}.to(tl.float32)",
            "to_bool": f"({x} != 0)",
        }[op]

    def constant(self, value: float | int | bool) -> str:
        if isinstance(value, bool):
            return "True" if value else "False"
        if isinstance(value, float) and math.isinf(value):
            return 'float("inf")' if value > 0 else '(-float("inf"))'
        if isinstance(value, float) and math.isnan(value):
            return 'float("nan")'
        return repr(float(value)) if isinstance(value, float) else repr(value)

    def load(self, load: Load, offset: str, mask: str | None = None) -> str:
        if offset.isdigit():  # one element for every lane: a scalar load, no mask
            return f"tl.load({load.tensor} + {offset}).to(tl.float32)"
        mask = mask or ("mask" if load.space == "full" else "kmask")
        return f"tl.load({load.tensor} + {offset}, mask={mask}, other=0).to(tl.float32)"

    def assign(self, name: str, value: str) -> str:
        return f"{name} = {value}"


_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">",
           "ge": ">=", "eq": "==", "ne": "!=", "and": "&", "or": "|", "fmod": "%"}  # fmt: skip
_CALLS = {"exp": "tl.exp", "log": "tl.log", "sqrt": "tl.sqrt", "rsqrt": "tl.rsqrt",
          "abs": "tl.abs", "erf": "tl.erf", "floor": "tl.floor", "ceil": "tl.ceil",
          "sin": "tl.sin", "cos": "tl.cos", "sigmoid": "tl.sigmoid", "where": "tl.where",
          "max": "tl.maximum", "min": "tl.minimum", "atan": "_atan"}  # fmt: skip
_GPU_CALLS = {**_CALLS, "log": "_log"}


def _indent(lines: list[str], depth: int = 1) -> list[str]:
    return ["    " * depth + line for line in lines]


def _signature(kernel, constexprs: list[str]) -> str:
    args = [*kernel.inputs, *kernel.outputs, *(f"{c}: tl.constexpr" for c in constexprs)]
    return f"@triton.jit\ndef {kernel.name}({', '.join(args)}):"


def reused_period(kernel: FusedKernel) -> int | None:
    """P when the kernel reads an operand at idx % P, P large and repeated (REUSED_PERIOD)."""
    periods = {
        node.attr.offset.args[1].attr
        for store in kernel.stores
        for node in walk(store.value)
        if node.op == "load"
        and node.attr.offset.op == "imod"
        and node.attr.offset.args[0] == var("idx")
        and node.attr.offset.args[1].op == "const"
    }
    repeated = [p for p in periods if p >= REUSED_PERIOD and kernel.numel % p == 0]
    return max((p for p in repeated if p < kernel.numel), default=None)


def pointwise_grid(kernel: FusedKernel, block: int) -> str:
    period = reused_period(kernel)
    if period is None:
        return f"(triton.cdiv({kernel.numel}, {block}),)"
    return f"({kernel.numel // period} * triton.cdiv({period}, {block}),)"


def pointwise_source(kernel: FusedKernel, gpu: bool) -> str:
    """Blocks of idx in order; with a reused period, repeat-major (block b of every repeat,
    then block b + 1), so the programs that share the reused operand's block run together and
    all but the first read it from L2."""
    printer = Printer(TritonSyntax(gpu))
    start = "tl.program_id(0).to(tl.int64)" if kernel.numel > INT32_LIMIT else "tl.program_id(0)"
    period = reused_period(kernel)
    if period is None:
        body = [f"idx = {start} * BLOCK + tl.arange(0, BLOCK)", f"mask = idx < {kernel.numel}"]
    else:
        repeats = kernel.numel // period
        body = [
            f"pid = {start}",
            f"pos = (pid // {repeats}) * BLOCK + tl.arange(0, BLOCK)",
            f"idx = (pid % {repeats}) * {period} + pos",
            f"mask = pos < {period}",
        ]
    for store in kernel.stores:
        value = printer.value(store.value)
        body += printer.take()
        body.append(f"tl.store({store.arg} + idx, {value}, mask=mask)")
    return "\n".join([_signature(kernel, ["BLOCK"]), *_indent(body)])


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
    printer = Printer(TritonSyntax(gpu))
    constexprs = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]
    if triton_gemv.is_gemv(kernel):
        body = triton_gemv.body(kernel, _k_range(kernel))
    else:
        body = _gemm_body(kernel, input_precision)
        if input_precision == "DOT":  # a tuning parameter: "tf32x3" or "ieee"
            constexprs.append("DOT")
    body += [
        f"idx = (bid * {kernel.m} + rm[:, None]) * {kernel.n} + rn[None, :]",
        f"mask = (rm[:, None] < {kernel.m}) & (rn[None, :] < {kernel.n})",
    ]
    if kernel.batch * kernel.m * kernel.n > INT32_LIMIT:
        body[-2] = body[-2].replace("(bid *", "(bid.to(tl.int64) *")
    if kernel.split_k > 1:
        body.append(f"tl.atomic_add({kernel.inputs[-1]} + idx, acc, mask=mask)")
    for store in kernel.stores:
        value = printer.value(store.value)
        body += printer.take() + [f"tl.store({store.arg} + idx, {value}, mask=mask)"]
    return "\n".join([_signature(kernel, constexprs), *_indent(body)])


def _gemm_body(kernel: GemmKernel, input_precision: str | None) -> list[str]:
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
        *_k_range(kernel),
        "    kmask = rk < k_end - kk * BLOCK_K",
        "    a = tl.load(a_ptr, mask=kmask[None, :], other=0.0)",
        "    b = tl.load(b_ptr, mask=kmask[:, None], other=0.0)",
        "    acc = tl.dot(a, b, acc"
        + (f", input_precision={input_precision})" if input_precision else ")"),
        f"    a_ptr += BLOCK_K * {a.strides[2]}",
        f"    b_ptr += BLOCK_K * {b.strides[1]}",
    ]
