"""The builtin model's C++ (OpenMP) kernels, verified by the real harness on the CPU.

Each case is a small KernelBench-format task written here (several outputs per task, so one
evaluation covers several kernels and code paths); the builtin generates the kernel file from
the task's analysis and the sandboxed harness must pass it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.builtin import cpp_backend
from kernelgraph.tools.builtin.expr import call, const, never_negative, var
from kernelgraph.tools.builtin.generate import Generator
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate


def generator(task: Path, tmp_path: Path) -> Generator:
    return builtin_generator(task, "cpp", tmp_path)


def verify(task: Path, kernel: Path, tmp_path: Path):
    config = EvalConfig(dsl="cpp", device="cpu", seeds=1, profile=False)
    return evaluate(task, kernel, config, cache=EvalCache(tmp_path / "cache"))


# name -> (forward, inputs, parameters, a fragment the generated C++ must contain)
CASES = {
    "pointwise_channel_broadcast": (
        "(torch.clamp(x * torch.sigmoid(x) * self.scale + self.bias, -0.5, 2.0), "
        "torch.tanh(y) * F.gelu(x) + torch.exp(-y * y))",
        "torch.randn(2, 6, 5, 7), torch.randn(2, 6, 5, 7)",
        "self.scale = nn.Parameter(torch.randn(6, 1, 1)); "
        "self.bias = nn.Parameter(torch.randn(6, 1, 1))",
        "in1[(k % 6)]",  # rows of one channel: its scale is read once per row, not gathered
    ),
    "last_dim_reduction": (
        "(torch.sum(F.relu(x), dim=-1), torch.amax(x, dim=-1), torch.prod(x * 0.1 + 1, dim=-1), "
        "y.sum() / 1000, y.sum(dim=-1))",  # y.sum(): one long row that the threads share
        "torch.randn(6, 40), torch.randn(4, 8192)",
        "",
        # rows of 8192 and the whole of y are summed in double (fp32 drifts past 1e-4), rows
        # of 40 in float
        (
            "schedule(static) reduction(+:r0d)",
            "#pragma omp simd reduction(+:r0d)",
            "#pragma omp simd reduction(+:r0)",
        ),
    ),
    "middle_dim_reduction_and_argmax": (
        "(torch.mean(x, dim=1), torch.var(x, dim=1), torch.argmax(x, dim=1), "
        "torch.argmin(x, dim=-1), torch.max(x, dim=-1).values, torch.max(x, dim=-1).indices, "
        "*torch.std_mean(x, dim=1, keepdim=True, correction=0))",
        "torch.randn(3, 20, 37)",
        "",
        # strided rows run a chunk of contiguous rows inside the r loop; index outputs are
        # int64, stored with the run-time dtype
        ("ii < w", "kg_store("),
    ),
    "softmax": (
        "(torch.softmax(x * 5, dim=-1), torch.log_softmax(x, dim=1), torch.logsumexp(x, dim=-1))",
        "torch.randn(5, 6, 300)",
        "",
        # softmax's exp is kept in a row buffer for the store sweep; contiguous rows ask for
        # 512-bit vectors (the bindings still find the function)
        ("c0[r] = ", 'KG_WIDE_VECTORS_BEGIN\nextern "C" void k0_'),
    ),
    "nonnegative_sums_in_float": (
        "(torch.softmax(x * 10, dim=-1), x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5), "
        "x.sum(-1))",
        "torch.randn(3, 2048)",
        "",
        # rows of 2048: the sums of exp and of squares cannot cancel and add in float, the
        # signed sum in double
        (
            "#pragma omp simd reduction(+:r1)",
            "#pragma omp simd reduction(+:r0)",
            "#pragma omp simd reduction(+:r0d)",
        ),  # fmt: skip
    ),
    "layernorm_and_groupnorm": (
        "(self.ln(x), self.gn(x))",
        "torch.randn(2, 8, 5, 7)",
        "self.ln = nn.LayerNorm([5, 7]); self.gn = nn.GroupNorm(4, 8)",
        "rb < 2",  # group norm: each channel's weight is read once, not gathered per element
    ),
    "gemm_bias_relu": (
        "(torch.relu(x @ self.w.t() + self.b), torch.bmm(y, y.transpose(1, 2)))",
        "torch.randn(37, 300), torch.randn(2, 9, 300)",
        "self.w = nn.Parameter(torch.randn(29, 300) * 0.05); "
        "self.b = nn.Parameter(torch.randn(29))",
        "kg_micro(",
    ),
    "big_output_asks_for_huge_pages": (
        "torch.relu(x) * 2 + torch.softmax(x, dim=-1)",
        "torch.randn(1024, 1280)",  # 5 MiB out: its pages are advised before the first write
        "",
        "_lib.kg_huge_pages(t",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_generated_cpp_kernels_verify(tmp_path, name):
    forward, inputs, params, fragment = CASES[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator(task, tmp_path).code())
    text = kernel.read_text()
    assert "load_inline(" in text and "tools." not in text  # standalone: no kernelgraph import
    for expected in [fragment] if isinstance(fragment, str) else fragment:
        assert expected in text
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


X, Y = var("x"), var("y")


@pytest.mark.parametrize(
    "expr, expected",
    [(call("exp", X - Y), True), (X * X, True), (call("abs", X) * call("sigmoid", Y), True),
     (call("pow", X, const(2.0)), True), (call("where", X, call("exp", Y), const(0.0)), True),
     (call("max", X, const(0.0)), True), (X * Y, False), (X - Y, False),
     (call("min", X, const(0.0)), False), (call("pow", X, const(3.0)), False),
     (call("exp", X) + const(-1.0), False)],
    ids=["exp", "square", "abs_sigmoid", "pow2", "where", "relu", "product", "difference",
         "min0", "pow3", "expm1_written_out"],
)  # fmt: skip
def test_never_negative_is_sure_before_it_says_so(expr, expected):
    """Only sums whose terms cannot be negative skip the double accumulator."""
    assert never_negative(expr) is expected


def _c_sources(code: str) -> list[str]:
    """The kernels' C++ sources and the name of the extension they are built into."""
    return [*re.findall(r'_src = r"""(.*?)"""', code, re.S),
            *re.findall(r"load_inline\(\s*'(\w+)'", code)]  # fmt: skip


def test_tuning_values_are_run_time_arguments(tmp_path):
    """Trying another config must not change the C++ source or the extension's name (no
    rebuild), only the launch."""
    forward, inputs, params, _ = CASES["gemm_bias_relu"]
    task = task_file(tmp_path, forward[:-1] + ", torch.mean(y, dim=1))", inputs, params=params)
    gen = generator(task, tmp_path)
    default = gen.default_config()
    other = {name: {key: values[0] for key, values in gen.tunables()[name].items()}
             for name in default}  # fmt: skip
    assert other != default
    first, second = gen.code(default), gen.code(other)
    assert _c_sources(first) == _c_sources(second) and len(_c_sources(first)) == 3 + 1
    assert first != second


HELPER_CHECK = r"""
extern "C" void apply(const float* x, float* out, int64_t n, int64_t which) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        out[i] = which == 0 ? kg_log(x[i]) : which == 1 ? kg_log1p(x[i])
                 : which == 2 ? kg_expm1(x[i]) : kg_exp(x[i]);
}
"""
SPECIALS = [0.0, -0.0, -1.0, -2.0, 1.0, 1e-40, -1e-40, 1e-45, 3e38, -3e38, 88.0, 88.7228317,
            88.7228394, 89.0, -87.4, -103.9, -104.0, -105.0]  # fmt: skip


@pytest.mark.parametrize(
    "which, reference",
    [(0, torch.log), (1, torch.log1p), (2, torch.expm1), (3, torch.exp)],
    ids=["log", "log1p", "expm1", "exp"],
)
def test_vectorised_math_helpers_match_torch(which, reference):
    """The polynomial exp/log/log1p/expm1 that let pointwise loops vectorise are accurate to a few
    ulp across the float range, and put NaN and inf where torch does."""
    from kernelgraph.tools.builtin.cpp_backend import HELPERS
    from kernelgraph.tools.dsl.cpp import build_library

    magnitudes = torch.logspace(-38, 38, 20001, dtype=torch.float64)
    x = torch.cat([magnitudes, -magnitudes, torch.linspace(-90, 90, 20001, dtype=torch.float64),
                   torch.tensor(SPECIALS + [float("inf"), -float("inf"), float("nan")],
                                dtype=torch.float64)]).float()  # fmt: skip
    got = torch.empty_like(x)
    build_library(
        HELPERS + HELPER_CHECK,
        name="helpers",
        extra_cflags=("-fno-math-errno", "-fno-trapping-math"),
    ).apply(x, got, x.numel(), which)
    expect = reference(x.double())
    finite = expect.isfinite() & (expect.abs() < 3.4e38)
    assert torch.equal(got.isnan(), expect.isnan())
    assert torch.equal(got[~finite & ~expect.isnan()], expect[~finite & ~expect.isnan()].float())
    ulp = torch.finfo(torch.float32).eps * expect[finite].abs().clamp_min(1.2e-38)
    assert ((got[finite].double() - expect[finite]).abs() / ulp).max() <= 4


def _huge_kib(start: int, end: int) -> int:
    """AnonHugePages (KiB) of this process's mappings that overlap [start, end)."""
    total, overlaps = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            low, high = (int(v, 16) for v in head.split("-"))
            overlaps = low < end and high > start
        elif overlaps and head == "AnonHugePages:":
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(
    not Path("/sys/kernel/mm/transparent_hugepage/enabled").exists()
    or "[never]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text(),
    reason="no transparent huge pages on this machine",
)
def test_huge_page_advice_gives_a_fresh_output_huge_pages():
    """kg_huge_pages on untouched memory makes its first writes fault in 2 MiB pages: that is
    what takes the page faults out of a big output's first sweep."""
    from kernelgraph.tools.builtin.cpp_backend import HELPERS
    from kernelgraph.tools.dsl.cpp import build_library

    lib = build_library(HELPERS, name="helpers_pages")
    plain, advised = torch.empty(16 << 20), torch.empty(16 << 20)  # 64 MiB each, untouched
    lib.kg_huge_pages(advised, advised.nbytes)
    plain.fill_(1.0)
    advised.fill_(1.0)
    span = lambda t: (t.data_ptr(), t.data_ptr() + t.nbytes)  # noqa: E731
    assert _huge_kib(*span(advised)) >= 32 << 10  # at least half of it in huge pages
    if "[always]" not in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text():
        assert _huge_kib(*span(plain)) == 0


@pytest.mark.parametrize("cores, choices", [(1, [0]), (2, [0, 1]), (3, [0, 1]), (16, [0, 1, 8])])
def test_thread_choices_never_repeat_every_core(tmp_path, monkeypatch, cores, choices):
    """threads 0 is every core; a tunable equal to the core count would time the same launch
    again (on a 2-core box the README's refine once spent a candidate on exactly that)."""
    monkeypatch.setattr(cpp_backend, "_cores", lambda: cores)
    forward, inputs, params, _ = CASES["softmax"]
    gen = generator(task_file(tmp_path, forward, inputs, params=params), tmp_path)
    for name, space in gen.tunables().items():
        assert space["threads"] == choices, name
