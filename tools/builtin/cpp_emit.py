"""C++ (OpenMP, CPU) source for the builtin's kernels: the expression syntax, shared pieces and
pointwise kernels (row kernels: tools/builtin/cpp_rows.py; GEMM: tools/builtin/cpp_gemm.py).

Each kernel is one `extern "C"` function over fp32 arguments; sizes are baked in, tuning values
(threads, tile sizes) are run-time int64 arguments so trying a config is not a rebuild. Inner
loops are plain counted loops under `omp simd`; exp/log/log1p/expm1/sigmoid/tanh/erf call
polynomial helpers (HELPERS in tools/builtin/cpp_backend.py) because libm's do not vectorise
without -ffast-math. Index arithmetic is int32 where every offset fits (vectorisable division).
"""

from __future__ import annotations

import math
import re

from kernelgraph.tools.builtin.expr import Expr, Load, const, var, walk
from kernelgraph.tools.builtin.kernels import FusedKernel, Store
from kernelgraph.tools.builtin.printer import Printer, operator_or_call

MAX_WIDTH = 256  # longest chunk of strided rows a row kernel keeps accumulators for
INT32_LIMIT = 2**31 - 1
MIN_ROW = 16  # shortest broadcast row worth a two-level pointwise loop
BOOL_OPS = frozenset("lt le gt ge eq ne and or not isnan to_bool".split())

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">",
           "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||"}  # fmt: skip
_CALLS = {"exp": "kg_exp", "sigmoid": "kg_sigmoid", "tanh": "kg_tanh", "erf": "kg_erf",
          "log": "kg_log", "sqrt": "std::sqrt", "abs": "std::fabs", "floor": "std::floor",
          "ceil": "std::ceil", "round": "std::nearbyint", "trunc": "std::trunc", "sin": "std::sin",
          "cos": "std::cos", "log1p": "kg_log1p", "expm1": "kg_expm1", "fmod": "std::fmod",
          "pow": "std::pow", "atan": "std::atan"}  # fmt: skip


class CppSyntax:
    index_symbols = {"idiv": "/", "imod": "%", "imul": "*", "iadd": "+"}

    def index_abs(self, x: str) -> str:
        return f"std::abs({x})"

    def index_of(self, value: str) -> str:
        return f"static_cast<int64_t>({value})"

    def primitive(self, op: str, a: list[str]) -> str:
        if (text := operator_or_call(op, a, _BINARY, _CALLS)) is not None:
            return text
        x = a[0]
        return {
            "neg": f"(-{x})",
            "rsqrt": f"(1.0f / std::sqrt({x}))",
            "not": f"(!{x})",
            "isnan": f"({x} != {x})",
            "to_float": f"static_cast<float>({x})",
            "to_bool": f"({x} != 0)",
            "where": f"({x} ? {a[1] if len(a) > 1 else ''} : {a[-1]})",
            "max": f"(({x} > {a[-1]} || {x} != {x}) ? {x} : {a[-1]})",  # NaN propagates
            "min": f"(({x} < {a[-1]} || {x} != {x}) ? {x} : {a[-1]})",
        }[op]

    def constant(self, value: float | int | bool) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        value = float(value)
        if math.isnan(value):
            return "NAN"
        if math.isinf(value) or abs(value) > 3.4e38:
            return "INFINITY" if value > 0 else "(-INFINITY)"
        return f"{value!r}f"

    def load(self, load: Load, offset: str, mask: str | None = None) -> str:
        return f"{load.tensor}[{offset}]"

    def assign(self, name: str, value: str) -> str:
        return f"const auto {name} = {value};"


# ------------------------------------------------------------------ shared pieces


def _bound(e: Expr, limits: dict[str, int]) -> int:
    """A bound of the magnitude of an integer offset expression (of any of its intermediate
    values too), given the bounds of its variables."""
    if e.op == "const":
        return abs(int(e.attr))
    if e.op == "var":
        return limits.get(e.attr, INT32_LIMIT + 1)
    if e.op == "iabs":
        return _bound(e.args[0], limits)
    if e.op == "ival":
        return int(e.attr)
    a, b = (_bound(x, limits) for x in e.args)
    return {"idiv": a // max(b, 1), "imod": min(a, b - 1), "imul": a * b, "iadd": a + b}[e.op]


def index_type(kernel, limits: dict[str, int], exprs: list[Expr]) -> str:
    """int32_t where every index and offset fits (cheaper and vectorisable division)."""
    offsets = [ld.offset for e in exprs for node in walk(e) if node.op == "load"
               for ld in [node.attr]]  # fmt: skip
    worst = max([*limits.values(), *(_bound(o, limits) for o in offsets)])
    return "int32_t" if worst < INT32_LIMIT else "int64_t"


def _is_arg_value(e: Expr, arg_vars: set[str]) -> bool:
    return any(n.op == "var" and n.attr in arg_vars for n in walk(e))


def dynamic_outputs(stores: list[Store], arg_vars: set[str] = frozenset()) -> set[str]:
    """Outputs whose dtype may not be float32 (booleans, reduction indices): stored by kg_store
    with a run-time dtype code."""
    return {s.arg for s in stores if s.value.op in BOOL_OPS or _is_arg_value(s.value, arg_vars)}


def fused_dynamic(kernel: FusedKernel) -> set[str]:
    """A FusedKernel's outputs stored with a run-time dtype code."""
    return dynamic_outputs(kernel.stores, arg_reduction_vars(kernel)) | kernel.integer_outputs


def signature(kernel, dynamic: set[str], params: list[str]) -> str:
    args = [f"const float* __restrict {name}" for name in kernel.inputs]
    for name in kernel.outputs:
        if name in dynamic:
            args += [f"void* {name}", f"int64_t {name}_dt"]
        else:
            args.append(f"float* __restrict {name}")
    args += [f"int64_t {p}" for p in params]
    return f'extern "C" void {kernel.name}({", ".join(args)})'


def store(arg: str, at: str, value: str, dynamic: set[str]) -> str:
    if arg in dynamic:
        return f"kg_store({arg}, {at}, {arg}_dt, {value});"
    return f"{arg}[{at}] = {value};"


def uses(line: str, name: str) -> bool:
    return re.search(rf"\b{name}\b", line) is not None


def indent(lines: list[str], depth: int = 1) -> list[str]:
    return ["    " * depth + line for line in lines]


def loop(head: str, body: list[str], pragma: str | None = None) -> list[str]:
    return ([pragma] if pragma else []) + [f"{head} {{", *indent(body), "}"]


def print_stores(printer: Printer, stores: list[Store], at: str, dynamic: set[str]) -> list[str]:
    lines = []
    for s in stores:
        value = printer.value(s.value)
        lines += printer.take() + [store(s.arg, at, value, dynamic)]
    return lines


def split_index(e: Expr, length: int, names: tuple[str, str, str] = ("idx", "k", "r")) -> Expr:
    """`e` with its load offsets rewritten for idx = k * length + r (0 <= r < length; `names`
    renames the three), so that operands read per row show as row values (hoisted) and
    modulo terms as r."""
    if e.op == "load":
        ld = e.attr
        return Expr("load", attr=Load(ld.tensor, _split(ld.offset, length, names), ld.space))
    return Expr(e.op, tuple(split_index(a, length, names) for a in e.args), e.attr) if e.args else e


def _split(e: Expr, n: int, names: tuple[str, str, str]) -> Expr:
    if e.op not in ("idiv", "imod", "imul", "iadd"):
        return e
    if e.args[0] != var(names[0]) or e.op not in ("idiv", "imod"):
        return Expr(e.op, tuple(_split(a, n, names) for a in e.args), e.attr)
    c, k, r = int(e.args[1].attr), var(names[1]), var(names[2])
    ix = lambda op, a, b: a if b == 1 and op in ("idiv", "imul") else Expr(op, (a, const(b)))  # noqa: E731
    if e.op == "idiv" and c % n == 0:
        return ix("idiv", k, c // n)
    if e.op == "idiv" and n % c == 0:
        return Expr("iadd", (ix("imul", k, n // c), ix("idiv", r, c)))
    if e.op == "imod" and c % n == 0:
        return r if c == n else Expr("iadd", (ix("imul", ix("imod", k, c // n), n), r))
    if e.op == "imod" and n % c == 0:
        return ix("imod", r, c)
    return e


def split_length(exprs: list[Expr], name: str) -> int:
    """The gcd of the divisors and moduli applied to variable `name` (0 when there are none)."""
    found = [int(n.args[1].attr) for e in exprs for n in walk(e)
             if n.op in ("idiv", "imod") and n.args[0] == var(name)]  # fmt: skip
    return math.gcd(*found) if found else 0


def broadcast_rows(kernel: FusedKernel) -> FusedKernel | None:
    """A pointwise kernel with broadcast operands as rows of the broadcast's length (the row
    kernel then reads those operands once per row instead of gathering them), or None."""
    n, length = kernel.numel, split_length([s.value for s in kernel.stores], "idx")
    if not MIN_ROW <= length < n:
        return None
    stores = [Store(s.arg, s.value, "full") for s in kernel.stores]
    return FusedKernel(kernel.name, n // length, length, 1, kernel.inputs, kernel.outputs, [],
                       stores, kernel.kind, kernel.integer_outputs)  # fmt: skip


def pointwise_source(kernel: FusedKernel) -> str:
    """One flat `parallel for simd` loop over the elements."""
    n = kernel.numel
    ix = index_type(kernel, {"idx": n}, [s.value for s in kernel.stores])
    dynamic = fused_dynamic(kernel)
    body = print_stores(Printer(CppSyntax()), kernel.stores, "idx", dynamic)
    pragma = "#pragma omp parallel for simd num_threads(nt) if (nt > 1) schedule(static)"
    lines = [
        signature(kernel, dynamic, ["threads"]) + " {",
        "    const int nt = kg_threads(threads);",
        *indent(loop(f"for ({ix} idx = 0; idx < {n}; ++idx)", body, pragma)),
        "}",
    ]
    return "\n".join(lines)


def arg_reduction_vars(kernel: FusedKernel) -> set[str]:
    return {f"r{j}" for j, red in enumerate(kernel.reductions) if red.kind.startswith("arg")}


__all__ = ["MAX_WIDTH", "CppSyntax", "broadcast_rows", "pointwise_source"]
