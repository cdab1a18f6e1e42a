"""The bench report: Markdown and standalone HTML from a manifest, a summary and results."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from kernelgraph.graph.bench import plots
from kernelgraph.graph.bench.metrics import best_samples, compare, summarize
from kernelgraph.graph.bench.report import (
    render_compare_markdown,
    render_html,
    render_markdown,
    write_report,
)
from kernelgraph.graph.bench.suite import natural_key
from kernelgraph.graph.html_page import figure_png_data_uri, plt
from kernelgraph.state.bench import (
    BenchEnvironment,
    BenchManifest,
    BenchProblem,
    BenchSettings,
    BenchSummary,
    GroupMetrics,
    SampleResult,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def problem(name: str, category: str) -> BenchProblem:
    return BenchProblem(name=name, path=f"/suite/{name}.py", level="level1", category=category)


def manifest_of(problems: list[BenchProblem]) -> BenchManifest:
    return BenchManifest(
        created_at="2026-11-26T12:00:00+00:00",
        db="/benches/b1/runs.db",
        settings=BenchSettings(
            suite="/suite", dsl="triton", device="cuda", model="builtin", max_iterations=7
        ),
        problems=problems,
        environment=BenchEnvironment(
            host="box1",
            device_name="NVIDIA H100 80GB HBM3",
            devices=2,
            driver="550.54.15",
            cuda="12.4",
            torch="2.7.1",
            triton="3.6.0",
            kernelgraph="0.1.0",
        ),
    )


def verified(name: str, speedup: float, **extra) -> SampleResult:
    fields = dict(
        problem=name,
        run_id=f"r-{name.split('/')[-1]}",
        status="verified",
        stop_reason="plateau",
        verified=True,
        speedup_vs_eager=speedup,
        speedup_vs_compile=speedup / 2,
        sol_pct=40.0 * speedup,
        kernel_ms=1.0 / speedup,
        eager_ms=1.0,
        compile_ms=0.5,
        flops=2_000_000,
        bytes=8_000_000,
        peak_flops=60e12,
        peak_bandwidth=3.3e12,
        wall_s=30.0,
        first_verified_s=10.0 * speedup,
        candidates=3,
        usd=0.25,
    )
    return SampleResult(**(fields | extra))


@pytest.fixture
def bench() -> tuple[BenchManifest, BenchSummary, list[SampleResult]]:
    """Four problems: two verified (one served from the cache), one failed, one crashed."""
    problems = [
        problem("level1/10_Matmul", "matmul"),
        problem("level1/2_Softmax", "reduction"),
        problem("level1/3_Relu", "elementwise"),
        problem("level1/1_Conv", "conv"),
    ]
    results = [
        verified("level1/10_Matmul", 2.0),
        verified("level1/2_Softmax", 1.25, cached=True),
        SampleResult(
            problem="level1/3_Relu",
            run_id="r-relu",
            status="no_verified_kernel",
            stop_reason="retries_exhausted",
            message="candidates kept failing: incorrect at seed 1\nmore detail",
            wall_s=50.0,
            usd=None,
        ),
        SampleResult(problem="level1/1_Conv", status="crashed", message="the run's process died"),
    ]
    return manifest_of(problems), summarize(problems, results, samples=1), results


@pytest.fixture
def empty_bench() -> tuple[BenchManifest, BenchSummary, list[SampleResult]]:
    return manifest_of([]), BenchSummary(overall=GroupMetrics()), []


def test_natural_sort_puts_2_before_10() -> None:
    names = ["level1/10_a", "level2/1_b", "level1/2_c", "level1/1_d"]
    assert sorted(names, key=natural_key) == [
        "level1/1_d",
        "level1/2_c",
        "level1/10_a",
        "level2/1_b",
    ]


def test_markdown_shows_the_headline_numbers(bench) -> None:
    manifest, summary, results = bench
    assert summary.overall.correctness_rate == 0.5  # what the formatted figures come from
    text = render_markdown(manifest, summary, results)
    assert "| correctness | 50.00% |" in text
    assert "| verified | 2 / 4 |" in text
    assert "| fast_1 vs eager | 50.00% |" in text
    assert "| fast_1.5 vs eager | 25.00% |" in text
    assert "| fast_2 vs eager | 0.00% |" in text  # 2.0x is not faster than 2x
    assert f"| geomean vs eager (verified) | {(2.0 * 1.25) ** 0.5:.2f}x |" in text  # 1.58x
    assert "| median % SOL (verified) | 65.00% |" in text  # median of 80 and 50
    assert "| cost | unknown |" in text  # one run's price is unknown
    # what it was measured on and with
    for fragment in ("2 x NVIDIA H100 80GB HBM3", "550.54.15 / 12.4", "2.7.1 / 3.6.0", "0.1.0"):
        assert fragment in text
    assert "| max iterations / samples | 7 / 1 |" in text
    assert "| >= 50% SOL | 2 |" in text and "| >= 80% SOL | 1 |" in text


def test_markdown_problem_rows_are_naturally_sorted_and_marked(bench) -> None:
    manifest, summary, results = bench
    text = render_markdown(manifest, summary, results)
    rows = [line for line in text.splitlines() if line.startswith("| level1/")]
    order = [row.split(" | ")[0].removeprefix("| ") for row in rows]
    assert order == ["level1/1_Conv", "level1/2_Softmax", "level1/3_Relu", "level1/10_Matmul"]
    softmax = next(row for row in rows if "2_Softmax" in row)
    assert (
        "| verified | 1.25x | 0.62x | 50.00% | 0.80 | 1.00 | 3 | 30.00 | r-2_Softmax | cached |"
        in softmax
    )
    relu = next(row for row in rows if "3_Relu" in row)
    assert "| no_verified_kernel | — | — | — |" in relu


def test_not_verified_list_names_each_failing_problem(bench) -> None:
    manifest, summary, results = bench
    text = render_markdown(manifest, summary, results)
    failing = text.split("## Not verified", 1)[1]
    assert (
        "- level1/3_Relu: no_verified_kernel (retries_exhausted): "
        "candidates kept failing: incorrect at seed 1\n" in failing
    )
    assert "- level1/1_Conv: crashed: the run's process died" in failing
    assert "Matmul" not in failing and "more detail" not in failing


def data_uris(page: str) -> list[str]:
    return re.findall(r'<img alt="[^"]+" src="([^"]+)"', page)


def assert_standalone(page: str, images: int) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "<script" not in page.lower() and "@import" not in page and "url(" not in page
    uris = data_uris(page)
    assert len(uris) == images == page.count("<img ")
    for uri in uris:
        prefix = "data:image/png;base64,"
        assert uri.startswith(prefix)
        assert base64.b64decode(uri[len(prefix) :])[:8] == PNG_MAGIC


def test_html_is_standalone_with_four_plots(bench) -> None:
    manifest, summary, results = bench
    page = render_html(manifest, summary, results)
    assert_standalone(page, images=4)
    assert "50.00%" in page and "level1/3_Relu: no_verified_kernel" in page


def test_html_escapes_what_runs_wrote(bench) -> None:
    manifest, summary, results = bench
    results = [*results[:-1], results[-1].model_copy(update={"message": "<b>boom</b> & more"})]
    page = render_html(manifest, summary, results)
    assert "&lt;b&gt;boom&lt;/b&gt; &amp; more" in page and "<b>boom</b>" not in page


def test_an_empty_bench_renders(empty_bench, tmp_path: Path) -> None:
    manifest, summary, results = empty_bench
    md_path, html_path = write_report(tmp_path / "bench", manifest, summary, results)
    assert (md_path.name, html_path.name) == ("report.md", "report.html")
    text = md_path.read_text()
    assert "| problems | 0 |" in text and "| correctness | 0.00% |" in text
    assert "| geomean vs eager (verified) | — |" in text
    assert "No verified kernel has a speed-of-light figure." in text
    assert_standalone(html_path.read_text(), images=4)


def test_write_report_writes_both_files(bench, tmp_path: Path) -> None:
    manifest, summary, results = bench
    md_path, html_path = write_report(tmp_path, manifest, summary, results)
    assert md_path.read_text() == render_markdown(manifest, summary, results)
    assert html_path.read_text().count("data:image/png;base64,") == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.md"]


def test_compare_renders_both_headlines_and_every_row(bench) -> None:
    manifest, summary_a, results_a = bench
    results_b = [
        verified("level1/10_Matmul", 1.0),  # slower
        verified("level1/2_Softmax", 1.25),  # same
        verified("level1/3_Relu", 3.0),  # new pass
    ]
    summary_b = summarize(manifest.problems, results_b, samples=1)
    rows = compare(results_a, results_b)
    text = render_compare_markdown("base", "new", rows, summary_a, summary_b)
    assert "| metric | base | new |" in text
    assert "| verified | 2 (50.00%) | 3 (75.00%) |" in text
    assert "| fast_1 vs eager | 50.00% | 50.00% |" in text
    assert "| level1/3_Relu | no_verified_kernel | verified | — | 3.00x | — | new_pass |" in text
    assert "| level1/10_Matmul | verified | verified | 2.00x | 1.00x | 0.50x | slower |" in text
    assert "| level1/1_Conv | crashed | — | — | — | — | only_a |" in text
    assert "Changes: new_pass 1, only_a 1, same 1, slower 1." in text


@pytest.mark.parametrize(
    "draw",
    [
        lambda best, summary: plots.speedup_distribution(best),
        lambda best, summary: plots.roofline_scatter(best),
        lambda best, summary: plots.time_to_first_verified(best),
        lambda best, summary: plots.category_bars(summary),
    ],
    ids=["speedups", "roofline", "first_verified", "categories"],
)
@pytest.mark.parametrize("empty", [True, False], ids=["empty", "full"])
def test_every_plot_has_a_title_and_labels(bench, empty_bench, draw, empty: bool) -> None:
    _, summary, results = empty_bench if empty else bench
    fig = draw(best_samples(results), summary)
    assert fig.axes
    for ax in fig.axes:
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    data_uri = figure_png_data_uri(fig)  # draws it, then closes it
    assert base64.b64decode(data_uri.split(",", 1)[1])[:8] == PNG_MAGIC
    assert not plt.fignum_exists(fig.number)


def test_roofline_draws_one_roof_per_device(bench) -> None:
    _, _, results = bench
    other = verified("level1/7_Gelu", 1.5, peak_flops=20e12, peak_bandwidth=1e12)
    best = best_samples([*results, other])
    fig = plots.roofline_scatter(best, {"level1/7_Gelu": "elementwise"})
    roofs = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("roof")]
    assert len(roofs) == 2
    plt.close(fig)


def test_a_copy_of_the_checkout_not_installed_reports_its_pyproject_version(tmp_path, monkeypatch):
    """A GPU box runs a copy of the tree, with no .git and nothing installed: the report's
    "kernelgraph" row then gives the version in pyproject.toml, not "unknown"."""
    from kernelgraph.graph.bench import api

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "kernelgraph"\nversion = "9.8.7"\n')
    monkeypatch.setattr(api, "IMPORT_ROOT", str(tmp_path))
    monkeypatch.setattr(api, "_version", lambda package: None)
    assert api.kernelgraph_version() == "9.8.7"
