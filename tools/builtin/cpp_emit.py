"""C++ (OpenMP, CPU) source for the builtin's kernels: pointwise, row (reduction) and GEMM.

Each kernel is one `extern "C"` function over fp32 arguments; sizes are baked in, tuning values
(threads, tile sizes) are run-time int64 arguments so trying a config is not a rebuild. Inner
loops are plain counted loops under `omp simd`; exp/sigmoid/tanh/erf use polynomial helpers
(HELPERS) because std::exp does not vectorise without -ffast-math. Row kernels hoist what does
not vary along the reduced axis out of the r loops; strided rows (inner > 1) sweep r outside
and a chunk of contiguous rows inside, with per-row accumulator arrays.
"""

from __future__ import annotations

import math

from tools.builtin.expr import Expr, Load, var, walk
from tools.builtin.kernels import FusedKernel, GemmKernel, Store
from tools.builtin.printer import Printer

MAX_WIDTH = 256  # longest chunk of strided rows a row kernel keeps accumulators for
MR, NR = 6, 32  # GEMM register tile (NR: two AVX-512 vectors)
INT32_LIMIT = 2**31 - 1
BOOL_OPS = frozenset("lt le gt ge eq ne and or not isnan to_bool".split())

HELPERS = r"""#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>
#include <omp.h>

// exp(x) with plain float arithmetic (vectorises): 2^k * poly(r), relative error ~1e-7.
static inline float kg_exp(float x) {
    const float c = x > 88.3f ? 88.3f : (x < -87.3f ? -87.3f : x);
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
    const float e = p * __builtin_bit_cast(float, (static_cast<int32_t>(k) + 127) << 23);
    return x > 88.72f ? INFINITY : (x < -87.3f ? 0.0f : e);
}
static inline float kg_sigmoid(float x) { return 1.0f / (1.0f + kg_exp(-x)); }
static inline float kg_tanh(float x) {
    const float e = kg_exp(-2.0f * std::fabs(x));
    const float t = (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : t;
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
static inline int kg_threads(int64_t t) { return t > 0 ? static_cast<int>(t) : omp_get_max_threads(); }
"""

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">",
           "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||"}  # fmt: skip
_CALLS = {"exp": "kg_exp", "sigmoid": "kg_sigmoid", "tanh": "kg_tanh", "erf": "kg_erf",
          "log": "std::log", "sqrt": "std::sqrt", "abs": "std::fabs", "floor": "std::floor",
          "ceil": "std::ceil", "round": "std::nearbyint", "trunc": "std::trunc", "sin": "std::sin",
          "cos": "std::cos", "log1p": "std::log1p", "expm1": "std::expm1", "fmod": "std::fmod",
          "pow": "std::pow"}  # fmt: skip


class CppSyntax:
    index_symbols = {"idiv": "/", "imod": "%", "imul": "*", "iadd": "+"}

    def primitive(self, op: str, a: list[str]) -> str:
        if op in _BINARY:
            return f"({a[0]} {_BINARY[op]} {a[1]})"
        if op in _CALLS:
            return f"{_CALLS[op]}({', '.join(a)})"
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

    def load(self, load: Load, offset: str) -> str:
        return f"{load.tensor}[{offset}]"

    def assign(self, name: str, value: str) -> str:
        return f"const auto {name} = {value};"


# ------------------------------------------------------------------ shared pieces


def _bound(e: Expr, limits: dict[str, int]) -> int:
    """An upper bound of an integer offset expression, given the bounds of its variables."""
    if e.op == "const":
        return int(e.attr)
    if e.op == "var":
        return limits.get(e.attr, INT32_LIMIT + 1)
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


def pointwise_source(kernel: FusedKernel) -> str:
    n = kernel.numel
    ix = index_type(kernel, {"idx": n}, [s.value for s in kernel.stores])
    dynamic = dynamic_outputs(kernel.stores)
    body = print_stores(Printer(CppSyntax()), kernel.stores, "idx", dynamic)
    pragma = "#pragma omp parallel for simd num_threads(nt) if (nt > 1) schedule(static)"
    lines = [
        signature(kernel, dynamic, ["threads"]) + " {",
        "    const int nt = kg_threads(threads);",
        *indent(loop(f"for ({ix} idx = 0; idx < {n}; ++idx)", body, pragma)),
        "}",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------ row kernels

INIT = {"sum": "0.0f", "prod": "1.0f", "max": "-INFINITY", "min": "INFINITY"}
CLAUSE = {"sum": "+", "prod": "*", "max": "max", "min": "min"}
COMBINE = {"sum": "{a} += {v};", "prod": "{a} *= {v};", "max": "{a} = {v} > {a} ? {v} : {a};",
           "min": "{a} = {v} < {a} ? {v} : {a};"}  # fmt: skip


def passes(kernel: FusedKernel) -> list[list[int]]:
    """Reductions grouped into sweeps over r: one joins the current sweep unless it uses a
    result of that sweep (max and sum of x share one read; softmax's sum needs the max)."""
    groups: list[list[int]] = []
    for j, red in enumerate(kernel.reductions):
        used = {n.attr for n in walk(red.value) if n.op == "var"}
        if groups and not used & {f"r{i}" for i in groups[-1]}:
            groups[-1].append(j)
        else:
            groups.append([j])
    return groups


class Hoister:
    """Replaces maximal subexpressions that do not vary along r by variables hN."""

    def __init__(self) -> None:
        self.table: dict[Expr, Expr] = {}
        self.done = 0

    def __call__(self, e: Expr) -> Expr:
        if e.op in ("const", "var"):
            return e
        if not any(n.op == "var" and n.attr == "idx" for n in walk(e)):
            return self.table.setdefault(e, var(f"h{len(self.table)}"))
        if e.op == "load":
            return e
        return Expr(e.op, tuple(self(a) for a in e.args), e.attr)

    def pending(self) -> list[tuple[str, Expr]]:
        items = list(self.table.items())[self.done :]
        self.done = len(self.table)
        return [(h.attr, e) for e, h in items]


def _declare(lines: list[str], ix: str, **values: str) -> list[str]:
    """`lines` preceded by the index variables they use."""
    used = [f"const {ix} {name} = {v};" for name, v in values.items()
            if any(_uses(line, name) for line in lines)]  # fmt: skip
    return used + lines


def _uses(line: str, name: str) -> bool:
    import re

    return re.search(rf"\b{name}\b", line) is not None


def _combine(j: int, kind: str, v: str, at: str = "") -> list[str]:
    if kind.startswith("arg"):
        op = ">" if kind == "argmax" else "<"
        b, r = f"b{j}{at}", f"r{j}{at}"
        return [f"const bool better{j} = {v} {op} {b} || ({v} != {v} && {b} == {b});",
                f"{b} = better{j} ? {v} : {b};", f"{r} = better{j} ? r : {r};"]  # fmt: skip
    return [COMBINE[kind].format(a=f"r{j}{at}", v=v)]


def row_source(kernel: FusedKernel) -> str:
    o, rlen, inner = kernel.outer, kernel.rlen, kernel.inner
    exprs = [red.value for red in kernel.reductions] + [s.value for s in kernel.stores]
    ix = index_type(kernel, {"idx": kernel.numel, "k": kernel.rows}, exprs)
    dynamic = dynamic_outputs(kernel.stores, arg_reduction_vars(kernel))
    hoist, syntax, strided = Hoister(), CppSyntax(), inner > 1
    at = "[ii]" if strided else ""
    names: dict[str, str] = {}
    row = Printer(syntax, names, prefix="w")  # row scope (contiguous rows)
    body: list[str] = []

    def ii_loop(lines: list[str], simd: bool = True) -> list[str]:
        head = "for (int64_t ii = 0; ii < w; ++ii)"
        return loop(head, _declare(lines, ix, k="k0 + ii"), "#pragma omp simd" if simd else None)

    def emit_hoisted() -> None:
        pending = hoist.pending()
        if strided and pending:
            printer, lines = Printer(syntax, dict(names), prefix="w"), []
            for h, e in pending:
                value = printer.value(e)
                lines += printer.take() + [f"{h}[ii] = {value};"]
            body.extend([f"float {h}[{MAX_WIDTH}];" for h, _ in pending] + ii_loop(lines))
        for h, e in pending:
            if not strided:
                names[h] = row.value(e)
                body.extend(row.take())
            else:
                names[h] = f"{h}[ii]"

    def r_loop(lines: list[str], pragma: str | None) -> list[str]:
        if not strided:
            return loop(f"for ({ix} r = 0; r < {rlen}; ++r)", _declare(lines, ix, idx="base + r"),
                        pragma)  # fmt: skip
        inner_loop = loop("for (int64_t ii = 0; ii < w; ++ii)",
                          _declare(lines, ix, k="k0 + ii", idx="base + ii"), pragma)  # fmt: skip
        start = f"const {ix} base = o * {rlen * inner} + r * {inner} + i0;"
        return loop(f"for ({ix} r = 0; r < {rlen}; ++r)", [start, *inner_loop])

    for p, members in enumerate(passes(kernel)):
        values = [hoist(kernel.reductions[j].value) for j in members]
        emit_hoisted()
        printer, lines, clauses, init = Printer(syntax, dict(names), prefix=f"p{p}_"), [], [], []
        for j, value in zip(members, values, strict=True):
            kind = kernel.reductions[j].kind
            spelled = printer.value(value)
            lines += printer.take() + _combine(j, kind, spelled, at)
            if kind.startswith("arg"):
                init += [f"float b{j}{'[' + str(MAX_WIDTH) + ']' if strided else ''};",
                         f"int64_t r{j}{'[' + str(MAX_WIDTH) + ']' if strided else ''};"]  # fmt: skip
                start = [f"b{j}{at} = {INIT[kind[3:]]};", f"r{j}{at} = 0;"]
            else:
                init += [f"float r{j}{'[' + str(MAX_WIDTH) + ']' if strided else ''};"]
                start = [f"r{j}{at} = {INIT[kind]};"]
                clauses.append(f"reduction({CLAUSE[kind]}:r{j})")
            body.extend(init if not strided else [])
            init = [] if not strided else init
            body.extend(start if not strided else [])
            if strided:
                init += start
            names[f"r{j}"] = f"r{j}{at}"
        if strided:
            decls = [x for x in init if x.startswith(("float", "int64_t"))]
            body.extend(decls + ii_loop([x for x in init if x not in decls], False))
        if strided or any(kernel.reductions[j].kind.startswith("arg") for j in members):
            pragma = "#pragma omp simd" if strided else None
        else:
            pragma = "#pragma omp simd " + " ".join(clauses)
        body.extend(r_loop(lines, pragma))
    fulls = [Store(s.arg, hoist(s.value), s.space) for s in kernel.stores if s.space == "full"]
    emit_hoisted()
    rows = [s for s in kernel.stores if s.space == "row"]
    if rows and strided:
        printer = Printer(syntax, dict(names), prefix="w")
        body.extend(ii_loop(print_stores(printer, rows, "k0 + ii", dynamic), False))
    elif rows:
        body.extend(print_stores(row, rows, "k", dynamic))
    if fulls:
        lines = print_stores(Printer(syntax, dict(names), prefix="f"), fulls, "idx", dynamic)
        body.extend(r_loop(lines, "#pragma omp simd"))
    pragma = "#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)"
    params = ["threads", "WIDTH"] if strided else ["threads"]
    head = [signature(kernel, dynamic, params) + " {", "    const int nt = kg_threads(threads);"]
    if not strided:
        body = [f"const {ix} base = k * {rlen};", *body]
        return "\n".join([*head, *indent(loop(f"for ({ix} k = 0; k < {kernel.rows}; ++k)", body,
                                              pragma)), "}"])  # fmt: skip
    chunk = [
        "const int64_t i0 = c * W, w = std::min<int64_t>(W, " + f"{inner} - i0);",
        f"const {ix} k0 = o * {inner} + i0;",
    ]
    head += [f"    const int64_t W = std::min<int64_t>(std::max<int64_t>(WIDTH, 1), {MAX_WIDTH});",
             f"    const int64_t chunks = ({inner} + W - 1) / W;"]  # fmt: skip
    outer = loop("for (int64_t c = 0; c < chunks; ++c)", chunk + body)
    pragma = pragma.replace("for ", "for collapse(2) ")
    return "\n".join([*head, *indent(loop(f"for (int64_t o = 0; o < {o}; ++o)", outer, pragma)),
                      "}"])  # fmt: skip


# ------------------------------------------------------------------ GEMM


def gemm_source(kernel: GemmKernel) -> str:
    """Blocked GEMM: output tiles BLOCK_M x BLOCK_N shared among threads; per BLOCK_K slice a
    thread packs A and B (zero padded to MR/NR multiples) and runs an MR x NR register
    micro-kernel into a tile buffer; the epilogue is applied when the tile is stored."""
    m, n, k, batch = kernel.m, kernel.n, kernel.k, kernel.batch
    a, b = kernel.a, kernel.b
    ix = index_type(kernel, {"idx": batch * m * n, "acc": 0},
                    [s.value for s in kernel.stores])  # fmt: skip
    dynamic = dynamic_outputs(kernel.stores)
    epilogue = print_stores(Printer(CppSyntax()), kernel.stores, "idx", dynamic)
    micro = f"""constexpr int64_t MR = {MR}, NR = {NR};

static inline void kg_micro(const float* __restrict ap, const float* __restrict bp,
                            float* __restrict c, int64_t ldc, int64_t kc) {{
    float acc[MR][NR];
    for (int64_t i = 0; i < MR; ++i)
        for (int64_t j = 0; j < NR; ++j) acc[i][j] = c[i * ldc + j];
    for (int64_t p = 0; p < kc; ++p) {{
        const float* bq = bp + p * NR;
        #pragma GCC unroll 8
        for (int64_t i = 0; i < MR; ++i) {{
            const float av = ap[p * MR + i];
            #pragma omp simd
            for (int64_t j = 0; j < NR; ++j) acc[i][j] += av * bq[j];
        }}
    }}
    for (int64_t i = 0; i < MR; ++i)
        for (int64_t j = 0; j < NR; ++j) c[i * ldc + j] = acc[i][j];
}}
"""
    params = ["threads", "BLOCK_M", "BLOCK_N", "BLOCK_K"]
    body = f"""    const int nt = kg_threads(threads);
    const int64_t BM = (std::max<int64_t>(BLOCK_M, 1) + MR - 1) / MR * MR;
    const int64_t BN = (std::max<int64_t>(BLOCK_N, 1) + NR - 1) / NR * NR;
    const int64_t BK = std::max<int64_t>(std::min<int64_t>(BLOCK_K, {k}), 1);
    const int64_t tiles_m = ({m} + BM - 1) / BM, tiles_n = ({n} + BN - 1) / BN;
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {{
        std::vector<float> apack(BM * BK), bpack(BK * BN), cbuf(BM * BN);
        #pragma omp for collapse(3) schedule(static)
        for (int64_t bb = 0; bb < {batch}; ++bb)
        for (int64_t tn = 0; tn < tiles_n; ++tn)
        for (int64_t tm = 0; tm < tiles_m; ++tm) {{
            const int64_t m0 = tm * BM, n0 = tn * BN;
            const int64_t mc = std::min<int64_t>(BM, {m} - m0), nc = std::min<int64_t>(BN, {n} - n0);
            const int64_t mp = (mc + MR - 1) / MR * MR, np = (nc + NR - 1) / NR * NR;
            const float* A = {a.arg} + bb * {a.strides[0]}LL;
            const float* B = {b.arg} + bb * {b.strides[0]}LL;
            std::fill(cbuf.begin(), cbuf.end(), 0.0f);
            for (int64_t k0 = 0; k0 < {k}; k0 += BK) {{
                const int64_t kc = std::min<int64_t>(BK, {k} - k0);
                for (int64_t i = 0; i < mp; ++i)
                    for (int64_t p = 0; p < kc; ++p)
                        apack[(i / MR) * kc * MR + p * MR + i % MR] = i < mc
                            ? A[(m0 + i) * {a.strides[1]}LL + (k0 + p) * {a.strides[2]}LL] : 0.0f;
                for (int64_t p = 0; p < kc; ++p)
                    for (int64_t j = 0; j < np; ++j)
                        bpack[(j / NR) * kc * NR + p * NR + j % NR] = j < nc
                            ? B[(k0 + p) * {b.strides[1]}LL + (n0 + j) * {b.strides[2]}LL] : 0.0f;
                for (int64_t j = 0; j < np; j += NR)
                    for (int64_t i = 0; i < mp; i += MR)
                        kg_micro(apack.data() + i * kc, bpack.data() + j * kc,
                                 cbuf.data() + i * BN + j, BN, kc);
            }}
            for (int64_t i = 0; i < mc; ++i) {{
                const {ix} row = (bb * {m} + m0 + i) * {n} + n0;
                const float* crow = cbuf.data() + i * BN;
                #pragma omp simd
                for (int64_t j = 0; j < nc; ++j) {{
                    const float acc = crow[j];
                    const {ix} idx = row + j;
{chr(10).join(indent(epilogue, 5))}
                }}
            }}
        }}
    }}"""
    return "\n".join([micro, signature(kernel, dynamic, params) + " {", body, "}"])


def arg_reduction_vars(kernel: FusedKernel) -> set[str]:
    return {f"r{j}" for j, red in enumerate(kernel.reductions) if red.kind.startswith("arg")}


__all__ = ["CppSyntax", "HELPERS", "gemm_source", "pointwise_source", "var"]
