"""The HTML reports in a real browser (headless Chromium): the page displays offline, is not
blank, and every plot image loads. The page as written has no script; a copy gets an inline
one that only writes a marker (how many images loaded) into the title for --dump-dom."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_bench_report import bench  # noqa: F401  (the fixture)

from kernelgraph.graph.bench.report import write_report
from kernelgraph.graph.html_page import plt
from kernelgraph.graph.run_report import render_run_html

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="needs headless Chromium (apt-get install chromium)"
    ),
]

MARKER = """<script>
window.addEventListener("load", function () {
  var images = Array.from(document.images);
  var ok = images.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.title = "images-ok:" + ok.length + "/" + images.length;
});
</script>
"""
PLOT_BLUE = np.array([0x1F, 0x77, 0xB4]) / 255  # matplotlib's first colour, in every page


def chromium(folder: Path, *args: str) -> subprocess.CompletedProcess:
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--no-first-run", f"--user-data-dir={folder / 'profile'}", *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def run_data() -> dict:
    """A run report's data: a compile error retried, then two profiled candidates."""
    base = {"parent_id": None, "label": "write", "stage": None, "kernel_ms": None,
            "speedup_vs_compile": None, "sol_pct": None, "cached": False}  # fmt: skip
    cands = [
        base | {"number": 1, "id": "c-1", "t_s": 3.0, "checked_s": None,
                "status": "compile_error", "message": "error: ';' expected",
                "speedup_vs_eager": None, "edges": ["retry"], "edge": "retry"},
        base | {"number": 2, "id": "c-2", "t_s": 9.0, "checked_s": 14.0, "status": "passed",
                "message": "", "speedup_vs_eager": 1.4, "edges": ["refine"], "edge": "refine"},
        base | {"number": 3, "id": "c-3", "t_s": 15.0, "checked_s": 21.0, "status": "passed",
                "message": "", "speedup_vs_eager": 2.1, "edges": ["stop"], "edge": "stop"},
    ]  # fmt: skip
    edges = [
        {"step": 5, "from": "compiler", "to": "coder", "kind": "retry", "candidate_id": "c-1"},
        {"step": 10, "from": "profiler", "to": "coder", "kind": "refine", "candidate_id": "c-2"},
        {"step": 14, "from": "profiler", "to": "end", "kind": "stop", "candidate_id": "c-3"},
    ]
    run = {"id": "r-1", "task_path": "task.py", "dsl": "cpp", "device": "cpu",
           "created_at": "2026-01-01T00:00:00", "status": "verified",
           "stop_reason": "max_iterations", "active_s": 21.0, "stop_message": ""}  # fmt: skip
    return {
        "run": run,
        "best": {"candidate_id": "c-3", "speedup_vs_eager": 2.1},
        "baseline": None,
        "spend": {"llm_calls": 3, "tokens_in": 10, "tokens_out": 20, "usd": 0.01},
        "candidates": cands,
        "edges": edges,
        "edge_counts": {"retry": 1, "refine": 1, "stop": 1},
    }


@pytest.fixture(params=["bench", "run"])
def report_page(request, bench, tmp_path: Path) -> tuple[Path, int]:  # noqa: F811
    """(report.html, how many plots it holds)."""
    if request.param == "bench":
        _, path = write_report(tmp_path, *bench)
        return path, 4
    path = tmp_path / "run.html"
    path.write_text(render_run_html(run_data()))
    return path, 3


def test_report_displays_offline_with_every_plot(report_page, tmp_path: Path) -> None:
    page, plots = report_page
    html = page.read_text()
    assert "<script" not in html  # the report itself needs none

    checked = tmp_path / "checked.html"
    checked.write_text(html.replace("</head>", MARKER + "</head>", 1))
    dom = chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", checked.as_uri())
    title = re.search(r"<title>(.*?)</title>", dom.stdout)
    assert title, dom.stderr[-2000:]
    assert title.group(1) == f"images-ok:{plots}/{plots}"

    shot = tmp_path / "shot.png"
    proc = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    assert shot.is_file() and shot.stat().st_size > 0, proc.stderr[-2000:]
    pixels = plt.imread(shot)[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    assert pixels.std() > 0.05  # not one colour
    rgb = (pixels * 255).round().astype(np.uint32)
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])
    assert len(colours) > 50  # text, tables and plots
    plotted = np.all(np.abs(pixels - PLOT_BLUE) < 0.08, axis=-1).sum()
    assert plotted > 500, "no plot colour on screen: the images did not display"


def test_the_marker_counts_a_broken_image(tmp_path: Path) -> None:
    """The check above would see an image that does not load."""
    page = tmp_path / "broken.html"
    broken = '<img alt="broken" src="data:image/png;base64,AAAA">'
    page.write_text(f"<!DOCTYPE html><html><head>{MARKER}</head><body>{broken}</body></html>")
    dom = chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", page.as_uri())
    assert "<title>images-ok:0/1</title>" in dom.stdout, dom.stderr[-2000:]
