"""The bench report: what a suite run measured, as Markdown (`report.md`) and as a standalone
HTML page with its plots embedded (`report.html`, opens offline), and the comparison of two
benches. One list of sections feeds both formats, so they always say the same."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

from kernelgraph.graph import html_page as hp
from kernelgraph.graph.bench import plots
from kernelgraph.graph.bench.metrics import best_samples
from kernelgraph.graph.bench.suite import natural_key
from kernelgraph.state.bench import BenchManifest, BenchSummary, GroupMetrics, SampleResult

Block = tuple  # ("p", text) | ("table", header, rows) | ("ul", items)
Section = tuple[str, list[Block]]
FAST_KEYS = ("0", "1", "1.5", "2")


def _f(value: float | None, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.2f}{suffix}"


def _x(value: float | None) -> str:
    return _f(value, "x")


def _pct(fraction: float | None) -> str:
    return "—" if fraction is None else f"{100 * fraction:.2f}%"


def _fast(rates: dict[str, float], key: str) -> str:
    return _pct(rates[key]) if key in rates else "—"


def _environment(manifest: BenchManifest) -> Section:
    env, s = manifest.environment, manifest.settings
    devices = f"{env.devices} x {env.device_name or '?'}" if env.devices else env.device_name
    rows = [
        ["device", f"{devices or '—'} ({s.device}, {env.executor} on {env.host or '?'})"],
        ["driver / CUDA", f"{env.driver or '—'} / {env.cuda or '—'}"],
        ["torch / triton", f"{env.torch or '—'} / {env.triton or '—'}"],
        ["kernelgraph", env.kernelgraph or "—"],
        ["suite", s.suite + (f" (only {', '.join(s.only)})" if s.only else "")],
        ["dsl / model", f"{s.dsl} / {s.model}"],
        ["precision / policy", f"{s.precision} / {s.policy}"],
        ["max iterations / samples", f"{s.max_iterations} / {s.samples}"],
        ["started", manifest.created_at],
        ["run store", manifest.db],
    ]
    return "Measured on", [("table", ["", "value"], rows)]


def _headline(summary: BenchSummary) -> Section:
    o = summary.overall
    rows = [
        ["problems", str(o.problems)],
        ["runs finished", f"{summary.finished} / {summary.expected}" + _unfinished(summary)],
        ["verified", f"{o.verified} / {o.problems}"],
        ["correctness", _pct(o.correctness_rate)],
        *[[f"fast_{k} vs eager", _fast(o.fast_p_eager, k)] for k in FAST_KEYS],
        *[[f"fast_{k} vs torch.compile", _fast(o.fast_p_compile, k)] for k in FAST_KEYS],
        ["geomean vs eager (verified)", _x(o.geomean_eager_verified)],
        ["geomean vs eager (all, unsolved = 1.0x)", _x(o.geomean_eager_all)],
        ["geomean vs torch.compile (verified)", _x(o.geomean_compile_verified)],
        ["geomean vs torch.compile (all)", _x(o.geomean_compile_all)],
        ["median % SOL (verified)", _f(o.sol_pct_median, "%")],
        *[
            [f"pass@{k}", _pct(v)]
            for k, v in sorted(summary.pass_at_k.items(), key=lambda kv: int(kv[0]))
        ],
    ]
    return "Headline", [("table", ["metric", "value"], rows)]


def _unfinished(summary: BenchSummary) -> str:
    if summary.finished >= summary.expected:
        return ""
    return (" (unfinished: problems with no result count as unsolved below; "
            "continue with kernelgraph bench --resume DIR)")  # fmt: skip


GROUP_HEADER = [
    "problems", "verified", "correctness", "fast_1 eager", "fast_1 compile",
    "geomean eager (verified)", "geomean eager (all)", "geomean compile (verified)", "median % SOL",
]  # fmt: skip


def _group_rows(groups: dict[str, GroupMetrics]) -> list[list[str]]:
    return [
        [
            name,
            str(g.problems),
            str(g.verified),
            _pct(g.correctness_rate),
            _fast(g.fast_p_eager, "1"),
            _fast(g.fast_p_compile, "1"),
            _x(g.geomean_eager_verified),
            _x(g.geomean_eager_all),
            _x(g.geomean_compile_verified),
            _f(g.sol_pct_median, "%"),
        ]  # fmt: skip
        for name, g in sorted(groups.items(), key=lambda kv: natural_key(kv[0]))
    ]


def _groups(summary: BenchSummary) -> list[Section]:
    out = []
    for title, first, groups in (
        ("By level", "level", summary.by_level),
        ("By category", "category", summary.by_category),
    ):
        if groups:
            out.append((title, [("table", [first, *GROUP_HEADER], _group_rows(groups))]))
    return out


def _sol(summary: BenchSummary) -> Section:
    sol = summary.sol_pct
    if not sol:
        return "% of speed-of-light", [("p", "No verified kernel has a speed-of-light figure.")]
    q1, q2, q3 = statistics.quantiles(sol, n=4, method="inclusive") if len(sol) > 1 else sol * 3
    rows = [
        ["kernels", str(len(sol))],
        [
            "min / q1 / median / q3 / max",
            " / ".join(_f(v, "%") for v in (min(sol), q1, q2, q3, max(sol))),
        ],
        [">= 50% SOL", str(sum(v >= 50 for v in sol))],
        [">= 80% SOL", str(sum(v >= 80 for v in sol))],
    ]
    return "% of speed-of-light", [("table", ["", "value"], rows)]


def _totals(summary: BenchSummary) -> Section:
    hours, rest = divmod(int(summary.wall_s), 3600)
    rows = [
        ["finished", f"{summary.finished} / {summary.expected} (problem, sample) pairs"],
        [
            "wall time (sum of runs)",
            f"{summary.wall_s:.2f} s ({hours}:{rest // 60:02d}:{rest % 60:02d})",
        ],
        ["LLM calls", str(summary.llm_calls)],
        ["tokens in / out", f"{summary.tokens_in} / {summary.tokens_out}"],
        ["cost", "unknown" if summary.usd is None else f"${summary.usd:.2f}"],
    ]
    return "Totals", [("table", ["", "value"], rows)]


PROBLEM_HEADER = [
    "problem", "category", "status", "vs eager", "vs compile", "% SOL", "kernel ms",
    "eager ms", "candidates", "wall s", "run", "cached",
]  # fmt: skip


def _problems(manifest: BenchManifest, best: dict[str, SampleResult]) -> Section:
    category = {p.name: p.category for p in manifest.problems}
    names = sorted(set(category) | set(best), key=natural_key)
    rows = []
    for name in names:
        r = best.get(name)
        if r is None:
            rows.append([name, category.get(name, "—"), "not run", *["—"] * 8, ""])
            continue
        rows.append(
            [
                name,
                category.get(name, "—"),
                r.status,
                _x(r.speedup_vs_eager),
                _x(r.speedup_vs_compile),
                _f(r.sol_pct, "%"),
                _f(r.kernel_ms),
                _f(r.eager_ms),
                str(r.candidates),
                _f(r.wall_s),
                r.run_id or "—",
                "cached" if r.cached else "",
            ]  # fmt: skip
        )
    return "Problems", [("table", PROBLEM_HEADER, rows)]


def _not_verified(best: dict[str, SampleResult]) -> Section:
    failed = [best[n] for n in sorted(best, key=natural_key) if not best[n].verified]
    if not failed:
        return "Not verified", [("p", "Every problem that ran has a verified kernel.")]
    counts = Counter(r.status for r in failed)
    items = []
    for r in failed:
        line = (r.message or "").strip().splitlines()
        why = f"{r.status} ({r.stop_reason})" if r.stop_reason else r.status
        items.append(f"{r.problem}: {why}" + (f": {line[0]}" if line else ""))
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return "Not verified", [("p", f"{len(failed)} problems: {tally}."), ("ul", items)]


def _sections(manifest: BenchManifest, summary: BenchSummary, best) -> list[Section]:
    return [
        _environment(manifest),
        _headline(summary),
        *_groups(summary),
        _sol(summary),
        _totals(summary),
        _problems(manifest, best),
        _not_verified(best),
    ]


def _title(manifest: BenchManifest) -> str:
    s = manifest.settings
    return f"kernelgraph bench: {s.suite} ({s.dsl}, {s.model})"


def _md_block(block: Block) -> str:
    if block[0] == "table":
        return hp.md_table(block[1], block[2])
    if block[0] == "ul":
        return "\n".join(f"- {item}" for item in block[1])
    return block[1]


def _html_block(block: Block) -> str:
    if block[0] == "table":
        return hp.html_table(block[1], block[2])
    if block[0] == "ul":
        return "<ul>" + "".join(f"<li>{hp.esc(item)}</li>" for item in block[1]) + "</ul>"
    return hp.paragraph(block[1])


def render_markdown(
    manifest: BenchManifest, summary: BenchSummary, results: list[SampleResult]
) -> str:
    parts = [f"# {_title(manifest)}"]
    for title, blocks in _sections(manifest, summary, best_samples(results)):
        parts.append(f"## {title}\n\n" + "\n\n".join(_md_block(b) for b in blocks))
    return "\n\n".join(parts) + "\n"


def _figures(manifest: BenchManifest, summary: BenchSummary, best) -> str:
    categories = {p.name: p.category for p in manifest.problems}
    return hp.section(
        "Plots",
        hp.img(plots.speedup_distribution(best), "histogram of verified speedups"),
        hp.img(plots.roofline_scatter(best, categories), "roofline and % of speed-of-light"),
        hp.img(plots.category_bars(summary), "verified fraction and geomean per category"),
        hp.img(plots.time_to_first_verified(best), "time to the first verified kernel"),
    )


def render_html(manifest: BenchManifest, summary: BenchSummary, results: list[SampleResult]) -> str:
    best = best_samples(results)
    sections = [
        hp.section(title, *(_html_block(b) for b in blocks))
        for title, blocks in _sections(manifest, summary, best)
    ]
    sections.insert(2, _figures(manifest, summary, best))  # after the headline
    return hp.page(_title(manifest), sections)


def write_report(
    folder: Path, manifest: BenchManifest, summary: BenchSummary, results: list[SampleResult]
) -> tuple[Path, Path]:
    """folder/report.md and folder/report.html, each written whole then moved into place."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in (
        ("report.md", render_markdown(manifest, summary, results)),
        ("report.html", render_html(manifest, summary, results)),
    ):
        path = folder / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        paths.append(path)
    return paths[0], paths[1]


def render_compare_markdown(
    name_a: str, name_b: str, rows: list[dict], summary_a: BenchSummary, summary_b: BenchSummary
) -> str:
    """Two benches side by side (headline), then every problem's change from A to B."""
    a, b = summary_a.overall, summary_b.overall
    head = [
        ["problems", str(a.problems), str(b.problems)],
        ["verified", f"{a.verified} ({_pct(a.correctness_rate)})", f"{b.verified} ({_pct(b.correctness_rate)})"],
        ["geomean vs eager (verified)", _x(a.geomean_eager_verified), _x(b.geomean_eager_verified)],
        ["geomean vs eager (all)", _x(a.geomean_eager_all), _x(b.geomean_eager_all)],
        ["geomean vs torch.compile (verified)", _x(a.geomean_compile_verified), _x(b.geomean_compile_verified)],
        ["fast_1 vs eager", _fast(a.fast_p_eager, "1"), _fast(b.fast_p_eager, "1")],
        ["fast_1 vs torch.compile", _fast(a.fast_p_compile, "1"), _fast(b.fast_p_compile, "1")],
        ["median % SOL", _f(a.sol_pct_median, "%"), _f(b.sol_pct_median, "%")],
    ]  # fmt: skip
    changes = Counter(r["changed"] for r in rows)
    table = [
        [
            r["problem"],
            r["a_status"] or "—",
            r["b_status"] or "—",
            _x(r["a_speedup_vs_eager"]),
            _x(r["b_speedup_vs_eager"]),
            _x(r["ratio"]),
            r["changed"],
        ]  # fmt: skip
        for r in sorted(rows, key=lambda r: natural_key(r["problem"]))
    ]
    header = ["problem", f"{name_a} status", f"{name_b} status", f"{name_a} vs eager"]
    header += [f"{name_b} vs eager", "ratio (B/A)", "change"]
    tally = ", ".join(f"{k} {changes[k]}" for k in sorted(changes)) or "no problems"
    return (
        "\n\n".join(
            [
                f"# kernelgraph bench compare: {name_a} (A) vs {name_b} (B)",
                "## Headline\n\n" + hp.md_table(["metric", name_a, name_b], head),
                f"## Problems\n\nChanges: {tally}.\n\n" + hp.md_table(header, table),
            ]
        )
        + "\n"
    )
