"""The bench report's figures (matplotlib, Agg). Each function returns a Figure and neither
shows nor saves it; every one has a title and axis labels with units, and draws a readable
"nothing to show" note for an empty input."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kernelgraph.graph import html_page
from kernelgraph.graph.html_page import plt  # pyplot on the Agg backend
from kernelgraph.state.bench import BenchSummary, SampleResult

EAGER, COMPILE = "#1f77b4", "#ff7f0e"


def _note(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#6e7781")


def _verified(best: dict[str, SampleResult]) -> list[SampleResult]:
    return [best[name] for name in sorted(best) if best[name].verified]


def _positive(values) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v) and v > 0]


def speedup_distribution(best: dict[str, SampleResult]) -> Figure:
    """Histogram of the verified speedups vs eager and vs torch.compile (log-spaced bins)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    verified = _verified(best)
    eager = _positive(r.speedup_vs_eager for r in verified)
    compiled = _positive(r.speedup_vs_compile for r in verified)
    ax.set_title("Speedup of the verified kernels")
    ax.set_xlabel("speedup over the baseline (x, log scale)")
    ax.set_ylabel("problems")
    ax.set_xscale("log")
    if not eager and not compiled:
        ax.set_xlim(0.1, 10)
        _note(ax, "no verified kernel with a timing")
        return fig
    every = eager + compiled + [1.0]
    low, high = math.log10(min(every)) - 0.05, math.log10(max(every)) + 0.05
    bins = np.logspace(low, high, max(8, min(40, 2 * int(math.sqrt(len(every))) + 6)))
    if eager:
        ax.hist(eager, bins=bins, alpha=0.6, color=EAGER, label=f"vs eager ({len(eager)})")
    if compiled:
        ax.hist(
            compiled,
            bins=bins,
            alpha=0.6,
            color=COMPILE,
            label=f"vs torch.compile ({len(compiled)})",
        )
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1, label="1.0x (as fast)")
    html_page.speedup_ticks(ax.xaxis, every)
    ax.legend()
    return fig


def _roof_pairs(points: list[SampleResult]) -> list[tuple[float, float]]:
    pairs = {(r.peak_flops, r.peak_bandwidth) for r in points}
    return sorted((f, b) for f, b in pairs if f and b and f > 0 and b > 0)


def _bandwidth(value: float) -> str:
    return f"{value / 1e12:.3g} TB/s" if value >= 1e12 else f"{value / 1e9:.3g} GB/s"


def _roofline(ax: Axes, best: dict[str, SampleResult], categories: dict[str, str] | None):
    points = [
        r
        for r in _verified(best)
        if r.flops and r.bytes and r.kernel_ms and r.flops > 0 and r.bytes > 0 and r.kernel_ms > 0
    ]
    ax.set_title("Roofline of the verified kernels")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, log scale)")
    ax.set_ylabel("achieved FLOP/s (log scale)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if not points:
        ax.set_xlim(0.01, 100)
        ax.set_ylim(1e6, 1e12)
        data_only = sum(1 for r in _verified(best) if r.flops == 0)
        why = f"\n({data_only} move data only: no FLOPs counted;\nsee % of speed-of-light)"
        _note(ax, "no verified kernel with a roofline" + (why if data_only else ""))
        return
    intensity = [r.flops / r.bytes for r in points]
    achieved = [r.flops / (r.kernel_ms * 1e-3) for r in points]
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(points):
        groups.setdefault((categories or {}).get(r.problem, "kernels"), []).append(i)
    for name in sorted(groups):
        idx = groups[name]
        ax.scatter([intensity[i] for i in idx], [achieved[i] for i in idx], s=22, label=name)
    for flops, bandwidth in _roof_pairs(points):
        ridge = flops / bandwidth
        xs = np.logspace(
            math.log10(min(min(intensity), ridge) / 4), math.log10(max(max(intensity), ridge) * 4)
        )
        ax.plot(
            xs,
            np.minimum(flops, bandwidth * xs),
            color="black",
            linewidth=1,
            label=f"roof {flops / 1e12:.3g} TFLOP/s, {_bandwidth(bandwidth)}",
        )
    ax.legend(fontsize="small")


def _sol(ax: Axes, best: dict[str, SampleResult]) -> None:
    rows = sorted(
        ((r.sol_pct, r.problem) for r in _verified(best) if r.sol_pct is not None), reverse=True
    )
    ax.set_title("% of speed-of-light per problem")
    ax.set_xlabel("problems, sorted by % SOL" if len(rows) > 30 else "problem")
    ax.set_ylabel("% of speed-of-light (%)")
    if not rows:
        _note(ax, "no verified kernel with a speed-of-light figure")
        return
    values = [v for v, _ in rows]
    if len(rows) > 30:
        ax.step(range(1, len(values) + 1), values, where="mid")
    else:
        ax.bar(range(len(values)), values, color=EAGER)
        ax.set_xticks(range(len(values)), [p for _, p in rows], rotation=60, ha="right")
        ax.tick_params(axis="x", labelsize="small")
    for level in (50, 80):
        ax.axhline(level, color="grey", linestyle=":", linewidth=1)


def roofline_scatter(
    best: dict[str, SampleResult], categories: dict[str, str] | None = None
) -> Figure:
    """Left: achieved FLOP/s against arithmetic intensity with each device's roof (one line per
    distinct peak FLOP/s and bandwidth pair), coloured by `categories` (problem -> category).
    Right: % of speed-of-light per problem, sorted."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    _roofline(left, best, categories)
    _sol(right, best)
    fig.tight_layout()
    return fig


def category_bars(summary: BenchSummary) -> Figure:
    """Per category (one row each): the verified fraction, and the geometric mean speedup vs
    eager of the verified problems."""
    names = sorted(summary.by_category, reverse=True)  # alphabetical from the top
    height = max(3.5, 0.35 * len(names) + 1.5)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, height), sharey=True)
    left.set_title("Verified fraction per category")
    left.set_xlabel("verified (% of the category's problems)")
    right.set_title("Geomean speedup vs eager (verified)")
    right.set_xlabel("speedup vs eager (x)")
    for ax in (left, right):
        ax.set_ylabel("category")
    if not names:
        _note(left, "no category")
        _note(right, "no category")
        return fig
    groups = [summary.by_category[n] for n in names]
    rates = [100 * g.correctness_rate for g in groups]
    bars = left.barh(names, rates, color=EAGER)
    left.bar_label(bars, labels=[f"{r:.0f}%" for r in rates], padding=2, fontsize="small")
    left.set_xlim(0, 115)
    means = [g.geomean_eager_verified for g in groups]
    bars = right.barh(names, [m or 0.0 for m in means], color=COMPILE)
    right.bar_label(bars, labels=[_x(m) for m in means], padding=2, fontsize="small")
    right.axvline(1.0, color="black", linestyle="--", linewidth=1)
    right.set_xlim(0, max([m or 0.0 for m in means] + [1.0]) * 1.2)
    fig.tight_layout()
    return fig


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def time_to_first_verified(best: dict[str, SampleResult]) -> Figure:
    """How many problems had a verified kernel after t seconds of their run (a step plot)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    times = sorted(r.first_verified_s for r in _verified(best) if r.first_verified_s is not None)
    ax.set_title("Time to the first verified kernel")
    ax.set_xlabel("time since the run's start (s)")
    ax.set_ylabel("problems with a verified kernel")
    if not times:
        _note(ax, "no verified kernel")
        return fig
    xs = [0.0, *times]
    ax.step(xs, range(len(xs)), where="post", color=EAGER)
    ax.axhline(len(best), color="grey", linestyle=":", linewidth=1, label=f"problems ({len(best)})")
    ax.set_ylim(0, len(best) * 1.05 + 0.5)
    ax.set_xlim(left=0)
    ax.legend(loc="lower right")
    return fig
