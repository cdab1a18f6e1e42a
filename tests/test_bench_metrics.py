"""KernelBench's figures for a bench (`graph/bench/metrics.py`), against hand-computed numbers."""

from __future__ import annotations

import math

import pytest

from kernelgraph.graph.bench.metrics import (
    SAME_WITHIN,
    best_samples,
    compare,
    group_metrics,
    pass_at_k,
    summarize,
)
from kernelgraph.state.bench import BenchProblem, SampleResult


def problem(name: str, level: str | None = None, category: str = "other") -> BenchProblem:
    return BenchProblem(name=name, path=f"/suite/{name}.py", level=level, category=category)


def result(
    name: str,
    sample: int = 0,
    eager: float | None = None,
    *,
    verified: bool | None = None,
    compile: float | None = None,
    **fields: object,
) -> SampleResult:
    """A verified result when it has a speedup (unless told otherwise), a failed one if not."""
    ok = eager is not None if verified is None else verified
    return SampleResult(
        problem=name,
        sample=sample,
        status="verified" if ok else "no_verified_kernel",
        verified=ok,
        speedup_vs_eager=eager,
        speedup_vs_compile=compile,
        **fields,
    )


def metrics_of(problems: list[BenchProblem], results: list[SampleResult]):
    return group_metrics(problems, best_samples(results))


# --- group_metrics -------------------------------------------------------------------------


@pytest.fixture
def four() -> list[BenchProblem]:
    return [problem(n) for n in "abcd"]


def test_brief_example(four: list[BenchProblem]) -> None:
    """2.0x and 0.5x verified, one failed, one without a result."""
    m = metrics_of(four, [result("a", eager=2.0), result("b", eager=0.5), result("c")])
    assert (m.problems, m.verified, m.correctness_rate) == (4, 2, 0.5)
    assert m.fast_p_eager == {"0": 0.5, "1": 0.25, "1.5": 0.25, "2": 0.0}  # 2.0 > 2 is false
    assert m.geomean_eager_verified == pytest.approx(1.0)
    assert m.geomean_eager_all == pytest.approx(1.0)  # (2 * 0.5 * 1 * 1) ** (1/4)
    assert m.fast_p_compile == {}  # compile never timed
    assert m.geomean_compile_verified is None and m.geomean_compile_all is None
    assert m.sol_pct_median is None


def test_compile_and_untimed(four: list[BenchProblem]) -> None:
    """4.0x/2.0x and 1.5x/0.75x (eager/compile), one verified but untimed, one task error."""
    results = [
        result("a", eager=4.0, compile=2.0, sol_pct=80.0),
        result("b", eager=1.5, compile=0.75, sol_pct=40.0),
        result("c", verified=True),
        SampleResult(problem="d", status="task_error"),
    ]
    m = metrics_of(four, results)
    assert (m.verified, m.correctness_rate) == (3, 0.75)
    assert m.fast_p_eager == {"0": 0.75, "1": 0.5, "1.5": 0.25, "2": 0.25}  # 1.5 > 1.5 false
    assert m.fast_p_compile == {"0": 0.75, "1": 0.25, "1.5": 0.25, "2": 0.0}
    assert m.geomean_eager_verified == pytest.approx(math.sqrt(6.0))
    assert m.geomean_eager_all == pytest.approx(6.0**0.25)
    assert m.geomean_compile_verified == pytest.approx(math.sqrt(1.5))
    assert m.geomean_compile_all == pytest.approx(1.5**0.25)
    assert m.sol_pct_median == pytest.approx(60.0)


def test_no_problems() -> None:
    m = group_metrics([], {})
    assert (m.problems, m.verified, m.correctness_rate) == (0, 0, 0.0)
    assert m.geomean_eager_all is None and m.geomean_eager_verified is None


def test_compile_timed_but_nothing_solved(four: list[BenchProblem]) -> None:
    m = group_metrics(four, best_samples([result("a")]), compile_was_timed=True)
    assert m.fast_p_compile == {"0": 0.0, "1": 0.0, "1.5": 0.0, "2": 0.0}
    assert m.geomean_compile_verified is None
    assert m.geomean_compile_all == 1.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_unusable_speedup_counts_as_untimed(bad: float) -> None:
    m = metrics_of([problem("a"), problem("b")], [result("a", eager=bad), result("b", eager=4.0)])
    assert m.fast_p_eager == {"0": 1.0, "1": 0.5, "1.5": 0.5, "2": 0.5}
    assert m.geomean_eager_verified == pytest.approx(4.0)
    assert m.geomean_eager_all == pytest.approx(2.0)


# --- best_samples --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("samples", "chosen"),
    [
        ([result("p", 0, 1.2), result("p", 1, 3.0), result("p", 2)], 1),  # fastest verified
        ([result("p", 2), result("p", 0), result("p", 1)], 0),  # none verified: the first
        ([result("p", 0), result("p", 1, verified=True)], 1),  # verified beats failed
        ([result("p", 0, verified=True), result("p", 1, 0.9)], 1),  # untimed ranks lowest
        ([result("p", 1, 2.0), result("p", 0, 2.0)], 0),  # a tie: the lower index
        ([result("p", 0, 1.0), result("p", 1, 5.0), result("p", 1)], 0),  # last one counts
    ],
)
def test_best_samples(samples: list[SampleResult], chosen: int) -> None:
    assert best_samples(samples)["p"].sample == chosen


def test_best_samples_per_problem() -> None:
    best = best_samples([result("a", 0), result("b", 0, 2.0), result("a", 1, 1.1)])
    assert {k: v.sample for k, v in best.items()} == {"a": 1, "b": 0}


# --- pass_at_k -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 0, 1, 0.0),
        (5, 0, 5, 0.0),
        (5, 5, 1, 1.0),
        (5, 5, 5, 1.0),
        (10, 3, 1, 0.3),
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (4, 1, 4, 1.0),  # n - c < k: every draw of k holds the pass
        (1, 1, 1, 1.0),
    ],
)
def test_pass_at_k_known_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(("n", "c", "k"), [(200, 3, 10), (200, 100, 100), (1000, 1, 500)])
def test_pass_at_k_matches_binomials(n: int, c: int, k: int) -> None:
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_pass_at_k_rejects_bad_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# --- summarize -----------------------------------------------------------------------------


@pytest.fixture
def bench() -> tuple[list[BenchProblem], list[SampleResult]]:
    """Two samples each of a (level1, softmax), b (level1, gemm), loose (no level, gemm)."""
    problems = [
        problem("level1/a", "level1", "softmax"),
        problem("level1/b", "level1", "gemm"),
        problem("loose", None, "gemm"),
    ]
    cost = {"wall_s": 10.0, "llm_calls": 2, "tokens_in": 100, "tokens_out": 10, "usd": 0.25}
    results = [
        result("level1/a", 0, **cost),
        result("level1/a", 1, 2.0, sol_pct=50.0, **cost),
        result("level1/b", 0, 1.2, wall_s=99.0, llm_calls=99, usd=None),  # superseded below
        result("loose", 0, 3.0, sol_pct=30.0, **cost),
        result("loose", 1, 1.0, sol_pct=90.0, **cost),
        result("elsewhere", 0, 9.0, usd=None),  # not a problem of this bench
        SampleResult(problem="level1/b", sample=0, status="crashed", **cost),
    ]
    return problems, results


def test_summarize(bench: tuple[list[BenchProblem], list[SampleResult]]) -> None:
    problems, results = bench
    s = summarize(problems, results, samples=2)
    assert (s.finished, s.expected) == (5, 6)
    assert (s.overall.problems, s.overall.verified) == (3, 2)
    assert s.overall.correctness_rate == pytest.approx(2 / 3)
    assert s.overall.fast_p_eager == pytest.approx(
        {"0": 2 / 3, "1": 2 / 3, "1.5": 2 / 3, "2": 1 / 3}
    )
    assert s.overall.geomean_eager_verified == pytest.approx(math.sqrt(6.0))
    assert list(s.by_level) == ["level1"]  # "loose" has no level
    assert (s.by_level["level1"].problems, s.by_level["level1"].verified) == (2, 1)
    assert {k: (g.problems, g.verified) for k, g in s.by_category.items()} == {
        "softmax": (1, 1),
        "gemm": (2, 1),
    }
    # pass@1: a 1/2, b 0/1, loose 2/2; pass@2 skips b (one finished sample)
    assert s.pass_at_k == pytest.approx({"1": 0.5, "2": 1.0})
    assert s.sol_pct == [30.0, 50.0]  # best samples only: loose's 1.0x sample is not its best
    assert (s.wall_s, s.llm_calls, s.tokens_in, s.tokens_out) == (50.0, 10, 500, 50)
    assert s.usd == pytest.approx(1.25)
    assert s.overall.fast_p_compile == {}


def test_summarize_single_sample_and_unknown_cost(
    bench: tuple[list[BenchProblem], list[SampleResult]],
) -> None:
    problems, results = bench
    s = summarize(problems, [*results, result("loose", 1, usd=None)], samples=1)
    assert s.pass_at_k == {}
    assert s.usd is None
    assert s.expected == 3
    assert best_samples(results)["loose"].sample == 0


def test_summarize_compile_timed_anywhere_counts_everywhere() -> None:
    """One problem's compile timing makes every group report compile figures."""
    problems = [problem("a", category="gemm"), problem("b", category="norm")]
    results = [result("a", eager=2.0, compile=1.5), result("b", eager=1.2)]
    s = summarize(problems, results, samples=1)
    assert s.by_category["norm"].fast_p_compile == {"0": 1.0, "1": 0.0, "1.5": 0.0, "2": 0.0}
    assert s.by_category["norm"].geomean_compile_all == 1.0
    assert s.overall.geomean_compile_verified == pytest.approx(1.5)


def test_summarize_empty() -> None:
    s = summarize([problem("a")], [], samples=3)
    assert (s.finished, s.expected, s.pass_at_k) == (0, 3, {})
    assert s.overall.correctness_rate == 0.0
    assert s.usd == 0.0


# --- compare -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "changed", "ratio"),
    [
        ([result("p", eager=2.0)], [result("p", eager=2.5)], "faster", 1.25),
        ([result("p", eager=2.0)], [result("p", eager=1.0)], "slower", 0.5),
        ([result("p", eager=2.0)], [result("p", eager=2.08)], "same", 1.04),
        ([result("p", eager=2.0)], [result("p", eager=1.92)], "same", 0.96),
        ([result("p")], [result("p", eager=0.8)], "new_pass", None),
        ([result("p", eager=3.0)], [result("p")], "lost_pass", None),
        ([result("p")], [result("p")], "same", None),
        ([result("p", eager=2.0)], [result("p", verified=True)], "same", None),  # untimed
        ([result("p", eager=2.0)], [], "only_a", None),
        ([], [result("p", eager=2.0)], "only_b", None),
    ],
)
def test_compare_changes(
    a: list[SampleResult], b: list[SampleResult], changed: str, ratio: float | None
) -> None:
    (row,) = compare(a, b)
    assert row["problem"] == "p"
    assert row["changed"] == changed
    assert row["ratio"] == (None if ratio is None else pytest.approx(ratio))


def test_compare_rows_use_best_samples_in_order() -> None:
    a = [result("x", 0, 1.0), result("x", 1, 2.0), result("y", 0)]
    b = [result("z", 0, 1.0), result("x", 0, 4.0), result("x", 1)]
    rows = compare(a, b)
    assert [r["problem"] for r in rows] == ["x", "y", "z"]
    x = rows[0]
    assert (x["a_speedup_vs_eager"], x["b_speedup_vs_eager"], x["ratio"]) == (2.0, 4.0, 2.0)
    assert (x["a_status"], x["b_status"], x["changed"]) == ("verified", "verified", "faster")
    assert (rows[1]["b_status"], rows[1]["changed"]) == (None, "only_a")
    assert (rows[2]["a_status"], rows[2]["changed"]) == (None, "only_b")


def test_same_within_is_five_percent() -> None:
    assert SAME_WITHIN == 0.05
