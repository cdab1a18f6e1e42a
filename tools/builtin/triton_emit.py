"""Triton source shared by the builtin's kernels, and its pointwise kernels.

One function per kernel kind, each in the shape of the Triton tutorials: program ids → offsets
→ masks → loads → math in fp32 → stores. Sizes are baked in as constants (the builtin
specialises to the task's shapes); block sizes and warps come from the tuning config.
"""

from __future__ import annotations

import math

from kernelgraph.tools.builtin.expr import Load, var, walk
from kernelgraph.tools.builtin.kernels import FusedKernel
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


def split_lanes(name: str, block: str) -> list[str]:
    """A [block // 4, 4] tile's four columns as {name}_0 ... {name}_3: a lane that owns four
    consecutive elements picks each out by a constant index (1d pools, depthwise sweeps)."""
    return [
        f"{name}_even, {name}_odd = tl.split(tl.reshape({name}, [{block} // 4, 2, 2]))",
        f"{name}_0, {name}_2 = tl.split({name}_even)",
        f"{name}_1, {name}_3 = tl.split({name}_odd)",
    ]


def join_lanes(name: str, lanes: list[str], block: str) -> str:
    """`name` = the [block // 4, 4] tile whose columns are the four `lanes`: split_lanes undone."""
    pairs = f"tl.join(tl.join({lanes[0]}, {lanes[2]}), tl.join({lanes[1]}, {lanes[3]}))"
    return f"{name} = tl.reshape({pairs}, [{block} // 4, 4])"


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
