"""KernelBench's figures for a bench, from its `SampleResult`s: pure functions, no I/O.

Definitions follow KernelBench (`fastp`: `correct & (speedup > p)` over all problems, so an
unsolved or missing problem counts against every figure). A problem counts once, by its best
sample. Where a result lacks a number KernelBench always has:

- a verified sample without a speedup (untimed) passes fast_0 (fast_0 is the correctness rate)
  but no fast_p with p > 0, is left out of the verified geomean and counts 1.0x in the geomean
  over all problems, like an unsolved one;
- a speedup that is not a positive finite number is treated as missing;
- torch.compile counts as timed for a group when any of its results (in `summarize`: any
  result of the bench) has a compile time or a speedup over compile; otherwise the compile
  figures stay empty ({} and None) rather than claiming 0%.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from typing import TypedDict

from kernelgraph.state.bench import FAST_P, BenchProblem, BenchSummary, GroupMetrics, SampleResult

SAME_WITHIN = 0.05  # `compare`: a speedup ratio within 5% of 1 is noise, not a change


def latest(results: Iterable[SampleResult]) -> list[SampleResult]:
    """One result per (problem, sample), the last one given: a rerun after resume supersedes."""
    by_key: dict[tuple[str, int], SampleResult] = {}
    for result in results:
        by_key.pop((result.problem, result.sample), None)  # order by the latest occurrence
        by_key[(result.problem, result.sample)] = result
    return list(by_key.values())


def speed(value: float | None) -> float | None:
    """A usable speedup, or None: zero, negative, NaN and inf would poison a geomean."""
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return value


def best_samples(results: list[SampleResult]) -> dict[str, SampleResult]:
    """Per problem the sample that represents it: the fastest verified one (one without a
    speedup ranks below any with one; ties go to the lower sample index), else its first."""
    by_problem: dict[str, list[SampleResult]] = {}
    for result in sorted(latest(results), key=lambda r: r.sample):
        by_problem.setdefault(result.problem, []).append(result)
    return {name: _best(samples) for name, samples in by_problem.items()}


def _best(samples: list[SampleResult]) -> SampleResult:
    """`samples` sorted by sample index; `max` keeps the first of equal ranks."""
    verified = [s for s in samples if s.verified]
    if not verified:
        return samples[0]
    return max(verified, key=_rank)


def _rank(result: SampleResult) -> tuple[bool, float]:
    value = speed(result.speedup_vs_eager)
    return (value is not None, value or 0.0)


def fast_p(speedups: list[float | None], problems: int) -> dict[str, float]:
    """KernelBench's fast_p for every p in FAST_P, keyed `f"{p:g}"`: the share of all
    `problems` that are verified (one entry of `speedups` each) and faster than p. An untimed
    verified problem (None) counts for p = 0 only, so that fast_0 is the correctness rate."""
    return {f"{p:g}": _rate(sum(1 for s in speedups if _faster(s, p)), problems) for p in FAST_P}


def _faster(value: float | None, p: float) -> bool:
    return p == 0 if value is None else value > p


def geomean(values: Iterable[float]) -> float | None:
    """The geometric mean, or None for no values."""
    logs = [math.log(v) for v in values]
    return math.exp(math.fsum(logs) / len(logs)) if logs else None


def _geomean_all(speedups: list[float | None], problems: int) -> float | None:
    """Over all `problems`: an unsolved or untimed one counts as 1.0x (no gain, no loss)."""
    ones = [1.0] * (problems - len(speedups))
    return geomean([s if s is not None else 1.0 for s in speedups] + ones)


def _rate(count: int, total: int) -> float:
    return count / total if total else 0.0


def compile_timed(results: Iterable[SampleResult]) -> bool:
    """Whether the bench timed torch.compile at all (else its figures stay empty)."""
    return any(r.compile_ms is not None or r.speedup_vs_compile is not None for r in results)


def group_metrics(
    problems: list[BenchProblem],
    best: dict[str, SampleResult],
    *,
    compile_was_timed: bool | None = None,
) -> GroupMetrics:
    """KernelBench's figures over PROBLEMS, each by its best sample in BEST (a problem without
    one is unsolved). `compile_was_timed` None: inferred from these problems' best samples."""
    bests = [best[p.name] for p in problems if p.name in best]
    solved = [b for b in bests if b.verified]
    total = len(problems)
    if compile_was_timed is None:
        compile_was_timed = compile_timed(bests)
    eager = [speed(b.speedup_vs_eager) for b in solved]
    compiled = [speed(b.speedup_vs_compile) for b in solved]
    sol = [b.sol_pct for b in solved if b.sol_pct is not None]
    return GroupMetrics(
        problems=total,
        verified=len(solved),
        correctness_rate=_rate(len(solved), total),
        fast_p_eager=fast_p(eager, total),
        fast_p_compile=fast_p(compiled, total) if compile_was_timed else {},
        geomean_eager_verified=geomean(s for s in eager if s is not None),
        geomean_eager_all=_geomean_all(eager, total),
        geomean_compile_verified=(
            geomean(s for s in compiled if s is not None) if compile_was_timed else None
        ),
        geomean_compile_all=_geomean_all(compiled, total) if compile_was_timed else None,
        sol_pct_median=statistics.median(sol) if sol else None,
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator 1 - C(n-c, k) / C(n, k) of Chen et al. (2021), for n
    samples of which c passed, as a product so that large n neither overflows nor cancels."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(results: list[SampleResult], k: int) -> float | None:
    """The mean pass@k over problems with at least k finished samples; None if there are none.
    `results` already hold one result per (problem, sample)."""
    counts: dict[str, list[int]] = {}  # problem -> [finished, verified]
    for result in results:
        tally = counts.setdefault(result.problem, [0, 0])
        tally[0] += 1
        tally[1] += int(result.verified)
    values = [pass_at_k(n, c, k) for n, c in counts.values() if n >= k]
    return math.fsum(values) / len(values) if values else None


def _groups(
    problems: list[BenchProblem], key: Callable[[BenchProblem], str | None]
) -> dict[str, list[BenchProblem]]:
    """Problems by KEY, in order of first appearance; a None key joins no group."""
    groups: dict[str, list[BenchProblem]] = {}
    for problem in problems:
        name = key(problem)
        if name is not None:
            groups.setdefault(name, []).append(problem)
    return groups


def summarize(
    problems: list[BenchProblem], results: list[SampleResult], samples: int
) -> BenchSummary:
    """The bench's summary: figures overall, by level and by category, pass@k (k = 1 and
    SAMPLES, when SAMPLES > 1) and the totals. Results of problems not in PROBLEMS are ignored,
    and of several results for one (problem, sample) the last counts, costs included."""
    names = {p.name for p in problems}
    kept = latest(r for r in results if r.problem in names)
    best = best_samples(kept)
    timed = compile_timed(kept)

    def metrics(group: list[BenchProblem]) -> GroupMetrics:
        return group_metrics(group, best, compile_was_timed=timed)

    ks = sorted({1, samples}) if samples > 1 else []
    pass_k = {str(k): mean_pass_at_k(kept, k) for k in ks}
    usd = [r.usd for r in kept]
    return BenchSummary(
        overall=metrics(problems),
        by_level={k: metrics(g) for k, g in _groups(problems, lambda p: p.level).items()},
        by_category={k: metrics(g) for k, g in _groups(problems, lambda p: p.category).items()},
        pass_at_k={k: v for k, v in pass_k.items() if v is not None},
        sol_pct=sorted(b.sol_pct for b in best.values() if b.verified and b.sol_pct is not None),
        finished=len(kept),
        expected=len(problems) * samples,
        wall_s=math.fsum(r.wall_s for r in kept),
        llm_calls=sum(r.llm_calls for r in kept),
        tokens_in=sum(r.tokens_in for r in kept),
        tokens_out=sum(r.tokens_out for r in kept),
        usd=None if any(u is None for u in usd) else math.fsum(u for u in usd if u is not None),
    )


class CompareRow(TypedDict):
    problem: str
    a_status: str | None
    b_status: str | None
    a_speedup_vs_eager: float | None
    b_speedup_vs_eager: float | None
    ratio: float | None  # b's speedup / a's, where both have one
    changed: str  # new_pass, lost_pass, faster, slower, same, only_a, only_b


def compare(a: list[SampleResult], b: list[SampleResult]) -> list[CompareRow]:
    """One row per problem of either bench, by best samples, in order of first appearance
    (A's problems, then B's new ones): what changed from A to B."""
    best_a, best_b = best_samples(a), best_samples(b)
    order = list(dict.fromkeys([r.problem for r in a] + [r.problem for r in b]))
    return [_row(name, best_a.get(name), best_b.get(name)) for name in order]


def _row(problem: str, a: SampleResult | None, b: SampleResult | None) -> CompareRow:
    speed_a = speed(a.speedup_vs_eager) if a else None
    speed_b = speed(b.speedup_vs_eager) if b else None
    ratio = speed_b / speed_a if speed_a is not None and speed_b is not None else None
    return CompareRow(
        problem=problem,
        a_status=a.status if a else None,
        b_status=b.status if b else None,
        a_speedup_vs_eager=a.speedup_vs_eager if a else None,
        b_speedup_vs_eager=b.speedup_vs_eager if b else None,
        ratio=ratio,
        changed=_change(a, b, ratio),
    )


def _change(a: SampleResult | None, b: SampleResult | None, ratio: float | None) -> str:
    """A pass gained or lost outweighs speed; between two verified kernels the speedup ratio
    decides, and within SAME_WITHIN of 1 (or without both timings) it is the same."""
    if a is None or b is None:
        return "only_b" if a is None else "only_a"
    if a.verified != b.verified:
        return "new_pass" if b.verified else "lost_pass"
    if not a.verified or ratio is None or abs(ratio - 1.0) <= SAME_WITHIN:
        return "same"
    return "faster" if ratio > 1.0 else "slower"
