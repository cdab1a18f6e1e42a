"""`kernelgraph report RUN`: the data and pages drawn from a real scripted run (CPU, C++)."""

from __future__ import annotations

import base64
import re

import pytest
from agent_helpers import Agent, kernel, summary_of, write_script

from kernelgraph.graph.checkpoints import Checkpoint
from kernelgraph.graph.run_report import (
    _edges,
    render_run_html,
    render_run_markdown,
    run_report_data,
)
from kernelgraph.state.graph_state import Best, GraphState, Outcome

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One run: a compile error, a wrong result, then a kernel that passes (3 iterations)."""
    folder = tmp_path_factory.mktemp("run_report")
    agent = Agent(folder)
    coder = [kernel("cpp_syntax_error"), kernel("cpp_scale_sub"), kernel("cpp_scale_add")]
    proc = agent.run(write_script(folder, coder), "--max-iterations", "3")
    summary = summary_of(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    return run_report_data(summary["run_id"], agent.db) | {"summary": summary}


def test_candidates_are_listed_in_order_with_the_edges_taken(report: dict) -> None:
    cands = report["candidates"]
    assert [c["number"] for c in cands] == [1, 2, 3]
    assert [c["status"] for c in cands] == ["compile_error", "incorrect", "passed"]
    assert [c["edges"] for c in cands] == [["retry"], ["retry"], ["stop"]]
    assert [c["edge"] for c in cands] == ["retry", "retry", "stop"]
    # each retry starts from the failed candidate
    assert cands[1]["parent_id"] == cands[0]["id"] and cands[2]["parent_id"] == cands[1]["id"]
    times = [c["t_s"] for c in cands]
    assert all(t is not None and t >= 0 for t in times) and times == sorted(times)
    assert cands[0]["checked_s"] is None  # a compile error is not an evaluation
    assert cands[2]["checked_s"] >= cands[2]["t_s"]
    assert cands[0]["message"] and cands[1]["message"] and not cands[2]["message"]
    assert cands[0]["speedup_vs_eager"] is None and cands[1]["speedup_vs_eager"] is None


def test_the_edges_and_summary_match_the_run(report: dict) -> None:
    summary, cands = report["summary"], report["candidates"]
    assert [(e["from"], e["to"], e["kind"]) for e in report["edges"]] == [
        ("compiler", "coder", "retry"),
        ("verifier", "coder", "retry"),
        ("profiler", "end", "stop"),
    ]
    assert report["edge_counts"] == {"retry": 2, "stop": 1}
    run = report["run"]
    assert (run["id"], run["status"], run["stop_reason"]) == (
        summary["run_id"],
        "verified",
        "max_iterations",
    )
    assert report["best"]["candidate_id"] == summary["best"]["candidate_id"] == cands[2]["id"]
    assert cands[2]["speedup_vs_eager"] == pytest.approx(summary["best"]["speedup_vs_eager"])
    assert report["spend"]["llm_calls"] == summary["spend"]["llm_calls"]


def test_html_has_three_plots_and_the_candidates(report: dict) -> None:
    page = render_run_html(report)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    uris = re.findall(r'<img alt="[^"]+" src="data:image/png;base64,([^"]+)"', page)
    assert len(uris) == 3 == page.count("<img ")
    assert all(base64.b64decode(uri)[:8] == PNG_MAGIC for uri in uris)
    for cand in report["candidates"]:
        assert cand["id"] in page
    assert "compile_error" in page and "Edges taken: retry 2, stop 1." in page


def test_markdown_lists_every_candidate(report: dict) -> None:
    text = render_run_markdown(report)
    assert text.startswith(f"# kernelgraph run {report['run']['id']}")
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \| c-", line)]
    assert [row.split(" | ")[1] for row in rows] == [c["id"] for c in report["candidates"]]
    assert "| incorrect |" in rows[1] and rows[1].rstrip().split(" | ")[-2] == "retry"
    assert "| stop reason | max_iterations (the iteration limit was reached) |" in text


def test_an_empty_run_renders() -> None:
    data = {
        "run": {
            "id": "r-x", "task_path": "t.py", "dsl": "cpp", "device": "cpu",
            "created_at": "2026-01-01T00:00:00", "status": "interrupted", "stop_reason": None,
            "active_s": 0.0, "stop_message": "",
        },
        "best": None, "baseline": None, "spend": {"llm_calls": 0, "usd": None},
        "candidates": [], "edges": [], "edge_counts": {},
    }  # fmt: skip
    assert render_run_html(data).count("data:image/png;base64,") == 3
    assert "| cost | unknown |" in render_run_markdown(data)


def point(step: int, node: str, nxt: str, cand: str | None, **state) -> Checkpoint:
    return Checkpoint(step, f"k{step}", node, nxt, {}, GraphState(candidate_id=cand, **state))


def failure(cand: str, stage: str = "profiler") -> Outcome:
    return Outcome(candidate_id=cand, status="timeout", stage=stage)


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        (  # profiled then refined; a bad reply asked again belongs to no candidate
            [
                point(1, "profiler", "coder", "c1", best=Best(candidate_id="c1", kernel_ms=1.0)),
                point(
                    2, "coder", "coder", "c1", outcome=Outcome(status="bad_reply", stage="coder")
                ),
                point(3, "coder", "compiler", "c2"),
            ],
            [("refine", "c1"), ("retry", None)],
        ),
        (  # a failed profile is a retry, retries exhausted escalate
            [
                point(1, "profiler", "coder", "c1", outcome=failure("c1")),
                point(2, "verifier", "sketch_writer", "c2", outcome=failure("c2", "verifier")),
                point(3, "sketch_writer", "coder", "c2"),
            ],
            [("retry", "c1"), ("escalate", "c2")],
        ),
        (  # the coder stops the run without writing: the stop is the last candidate's
            [point(1, "coder", "compiler", "c1"), point(2, "coder", "", "c1")],
            [("stop", "c1")],
        ),
    ],
    ids=["refine", "escalate", "coder_stop"],
)
def test_edges_are_classified(points: list[Checkpoint], expected: list[tuple]) -> None:
    assert [(e["kind"], e["candidate_id"]) for e in _edges(points)] == expected
