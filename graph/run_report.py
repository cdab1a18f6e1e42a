"""`kernelgraph report RUN`: one run drawn. Its candidates over time, the best speedup so far,
and the edges the graph took (retry, refine, escalate, stop), read back from the run store and
the run's checkpoints; rendered as a standalone HTML page or as Markdown."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from matplotlib.ticker import MaxNLocator

from kernelgraph.graph import html_page as hp
from kernelgraph.graph.build import graph_kind
from kernelgraph.graph.checkpoints import checkpoint_list
from kernelgraph.graph.inspect import live_status, run_state
from kernelgraph.graph.routes import failed
from kernelgraph.graph.runner import _open_run, spend_of
from kernelgraph.graph.summary import STOP_MESSAGES
from kernelgraph.state.checkpoint import open_checkpointer

CHECKS = ("compiler", "verifier", "profiler")
EDGE_KINDS = ("retry", "refine", "escalate", "feedback", "edit", "stop")
EDGE_COLORS = {"retry": "#d62728", "refine": "#2ca02c", "escalate": "#9467bd", "stop": "black"}


def _seconds(start: str, when: str | None) -> float | None:
    if not when:
        return None
    a, b = datetime.fromisoformat(start), datetime.fromisoformat(when)
    return round((b.replace(tzinfo=None) - a.replace(tzinfo=None)).total_seconds(), 3)


def _edge_kind(node: str, to: str, state) -> str | None:
    """What leaving `node` for `to` means; None for the forward steps of one candidate."""
    if to == "":
        return "stop" if node not in ("input", "__start__") else None
    if to == "sketch_writer" and node != "planner":
        return "escalate"
    if to == "coder" and node in (*CHECKS, "coder"):
        if node == "profiler" and not (state and failed(state)):
            return "refine"
        outcome = state.outcome if state else None
        return "feedback" if outcome is not None and outcome.stage == "human" else "retry"
    if to == "compiler" and node == "verifier":
        return "edit"
    return None


def _edges(points) -> list[dict[str, Any]]:
    """Every retry/refine/escalate/stop the run took, in order. An edge out of a check belongs
    to the checked candidate; one out of the coder (a bad reply asked again, the run's stop)
    belongs to the candidate before only when the coder wrote none."""
    edges, previous = [], None
    for p in points:
        state = p.state
        cid = state.candidate_id if state else None
        kind = _edge_kind(p.node, p.next, state)
        if kind is not None:
            own = p.node in CHECKS or (p.node == "coder" and cid == previous and kind == "stop")
            edges.append(
                {"step": p.step, "from": p.node, "to": p.next or "end", "kind": kind}
                | {"candidate_id": cid if own else None}
            )
        if p.node == "coder" or previous is None:
            previous = cid
    return edges


def _outcomes(points) -> dict[str, Any]:
    """The last check outcome of each candidate."""
    last = {}
    for p in points:
        outcome = p.state.outcome if p.state else None
        if p.node in CHECKS and outcome is not None and outcome.candidate_id:
            last[outcome.candidate_id] = outcome
    return last


def _candidate(store, cand, start, outcome, baseline, edges) -> dict[str, Any]:
    evaluations = store.evaluations_for_candidate(cand["id"])
    timed = [e for e in evaluations if e["status"] == "passed" and e["kernel_ms"]]
    kernel_ms = timed[-1]["kernel_ms"] if timed else None
    speedup = compile_speedup = None
    if kernel_ms is not None:
        speedup = (
            baseline.speedup(kernel_ms, "eager") if baseline else timed[-1]["speedup_vs_eager"]
        )
        compile_speedup = baseline.speedup(kernel_ms, "compile") if baseline else None
    status = outcome.status if outcome else (evaluations[-1]["status"] if evaluations else None)
    mine = [e["kind"] for e in edges if e["candidate_id"] == cand["id"]]
    return {
        "id": cand["id"],
        "parent_id": cand["parent_id"],
        "label": cand["label"],
        "t_s": _seconds(start, cand["created_at"]),
        "checked_s": _seconds(start, evaluations[-1]["created_at"]) if evaluations else None,
        "status": status or "unchecked",
        "stage": outcome.stage if outcome else None,
        "message": (outcome.message if outcome and outcome.status != "passed" else "") or "",
        "speedup_vs_eager": speedup,
        "speedup_vs_compile": compile_speedup,
        "kernel_ms": kernel_ms,
        "sol_pct": timed[-1]["sol_pct"] if timed else None,
        "cached": bool(timed and timed[-1]["verdict"].get("cached")),
        "edges": mine,
        "edge": mine[-1] if mine else None,
    }


def run_report_data(run_id: str, db: Path | None = None) -> dict[str, Any]:
    """Everything the run report draws, as plain JSON-able values."""
    store, row, config = _open_run(run_id, db)
    state, _ = run_state(store, run_id, config.search)
    kind = graph_kind(config.search)
    points = checkpoint_list(kind.compile(open_checkpointer(store)), run_id, kind.state)
    edges, outcomes = _edges(points), _outcomes(points)
    start = row["created_at"]
    candidates = [
        _candidate(store, c, start, outcomes.get(c["id"]), state.baseline, edges)
        for c in store.candidates_for_run(run_id)
    ]
    for number, cand in enumerate(candidates, 1):
        cand["number"] = number
    best = state.best.model_dump() if state.best else None
    return {
        "run": {k: row[k] for k in ("id", "task_path", "dsl", "device", "created_at")}
        | {
            "status": live_status(row),
            "stop_reason": row["stop_reason"],
            "active_s": row["active_s"],
        }
        | {"stop_message": STOP_MESSAGES.get(row["stop_reason"] or "", "")},
        "best": best,
        "baseline": state.baseline.model_dump() if state.baseline else None,
        "spend": spend_of(store, run_id),
        "candidates": candidates,
        "edges": edges,
        "edge_counts": dict(Counter(e["kind"] for e in edges)),
    }


def _f(value, spec: str = ".2f", suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def _speedup_plot(data: dict):
    fig, ax = hp.plt.subplots(figsize=(9, 4.5))
    ax.set_title("Candidates over time")
    ax.set_xlabel("time since the run's start (s)")
    ax.set_ylabel("speedup vs eager (x, log scale)")
    ax.set_yscale("log")
    cands = data["candidates"]
    timed = [c for c in cands if c["speedup_vs_eager"]]
    when = [c["checked_s"] if c["checked_s"] is not None else (c["t_s"] or 0.0) for c in cands]
    if timed:
        xs = [when[c["number"] - 1] for c in timed]
        ax.scatter(xs, [c["speedup_vs_eager"] for c in timed], color="#2ca02c", label="profiled")
        for x, c in zip(xs, timed, strict=True):
            ax.annotate(f"#{c['number']}", (x, c["speedup_vs_eager"]), fontsize="small")
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="1.0x (eager)")
    else:
        ax.set_ylim(0.1, 10)
    bad = [c for c in cands if not c["speedup_vs_eager"] and c["status"] != "passed"]
    speeds = [c["speedup_vs_eager"] for c in timed] + [1.0]
    if timed and bad:  # room at the bottom for the failed ones
        ax.set_ylim(min(speeds) / 3, max(speeds) * 1.5)
    hp.speedup_ticks(ax.yaxis, speeds)
    for c in bad:  # at the bottom of the axes, with their status
        x = when[c["number"] - 1]
        ax.scatter([x], [0.04], marker="x", color="#d62728", transform=ax.get_xaxis_transform())
        ax.annotate(c["status"], (x, 0.07), xycoords=ax.get_xaxis_transform(), rotation=90,
                    fontsize="small", color="#d62728", va="bottom")  # fmt: skip
    if not cands:
        ax.text(0.5, 0.5, "no candidate", ha="center", transform=ax.transAxes)
    ax.set_xlim(left=0, right=max([*when, 1.0]) * 1.05)
    if timed:
        ax.legend(loc="best")
    return fig


def _best_plot(data: dict):
    fig, ax = hp.plt.subplots(figsize=(9, 4))
    ax.set_title("Best speedup so far")
    ax.set_xlabel("candidate (#, in the order written)")
    ax.set_ylabel("best speedup vs eager (x)")
    best, xs, ys = None, [], []
    for c in data["candidates"]:
        if c["speedup_vs_eager"]:
            best = max(best or 0.0, c["speedup_vs_eager"])
        xs.append(c["number"])
        ys.append(best if best is not None else float("nan"))
    if best is None:
        ax.text(0.5, 0.5, "no profiled candidate", ha="center", transform=ax.transAxes)
    else:
        ax.step(xs, ys, where="post", marker="o", color="#1f77b4")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0.5, len(xs) + 0.5)
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.set_ylim(bottom=0)
    return fig


def _edges_plot(data: dict):
    fig, (left, right) = hp.plt.subplots(1, 2, figsize=(12, 3.8), width_ratios=[1, 2.5])
    counts = data["edge_counts"]
    kinds = [k for k in EDGE_KINDS if k in counts]
    left.set_title("Edges taken")
    left.set_xlabel("edge")
    left.set_ylabel("times taken")
    right.set_title("Edges over the run")
    right.set_xlabel("graph step")
    right.set_ylabel("edge")
    if not kinds:
        for ax in (left, right):
            ax.text(0.5, 0.5, "no edge taken", ha="center", transform=ax.transAxes)
        return fig
    colors = [EDGE_COLORS.get(k, "#7f7f7f") for k in kinds]
    left.bar(kinds, [counts[k] for k in kinds], color=colors)
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    rank = {k: i for i, k in enumerate(kinds)}
    for e in data["edges"]:
        right.scatter(e["step"], rank[e["kind"]], color=EDGE_COLORS.get(e["kind"], "#7f7f7f"))
    right.set_yticks(range(len(kinds)), kinds)
    right.set_ylim(-0.5, len(kinds) - 0.5)
    fig.tight_layout()
    return fig


CANDIDATE_HEADER = [
    "#", "candidate", "parent", "label", "written (s)", "checked (s)", "status",
    "vs eager", "vs compile", "kernel ms", "% SOL", "edge after", "message",
]  # fmt: skip


def _candidate_rows(data: dict) -> list[list[str]]:
    return [
        [
            str(c["number"]),
            c["id"],
            c["parent_id"] or "—",
            c["label"],
            _f(c["t_s"], ".1f"),
            _f(c["checked_s"], ".1f"),
            c["status"] + (" (cached)" if c["cached"] else ""),
            _f(c["speedup_vs_eager"], ".2f", "x"),
            _f(c["speedup_vs_compile"], ".2f", "x"),
            _f(c["kernel_ms"], ".4f"),
            _f(c["sol_pct"], ".1f"),
            ", ".join(c["edges"]) or "—",
            c["message"].splitlines()[0] if c["message"] else "",
        ]  # fmt: skip
        for c in data["candidates"]
    ]


def _summary_rows(data: dict) -> list[list[str]]:
    run, best, spend = data["run"], data["best"] or {}, data["spend"]
    stop = run["stop_reason"] or "—"
    usd = spend.get("usd")
    return [
        ["task", run["task_path"]],
        ["dsl / device", f"{run['dsl']} / {run['device']}"],
        ["started", run["created_at"]],
        ["status", run["status"]],
        ["stop reason", f"{stop} ({run['stop_message']})" if run["stop_message"] else stop],
        ["best", best.get("candidate_id") or "—"],
        ["best vs eager", _f(best.get("speedup_vs_eager"), ".2f", "x")],
        ["best vs torch.compile", _f(best.get("speedup_vs_compile"), ".2f", "x")],
        ["best % SOL", _f(best.get("sol_pct"), ".1f", "%")],
        ["candidates", str(len(data["candidates"]))],
        ["time running (s)", _f(run["active_s"], ".1f")],
        ["LLM calls", str(spend.get("llm_calls", 0))],
        ["tokens in / out", f"{spend.get('tokens_in', 0)} / {spend.get('tokens_out', 0)}"],
        ["cost", "unknown" if usd is None else f"${usd:.4f}"],
    ]


def _edge_line(data: dict) -> str:
    counts = data["edge_counts"]
    return ", ".join(f"{k} {counts[k]}" for k in EDGE_KINDS if k in counts) or "none"


def render_run_html(data: dict) -> str:
    title = f"kernelgraph run {data['run']['id']}"
    sections = [
        hp.section("Summary", hp.html_table(["", "value"], _summary_rows(data))),
        hp.section(
            "Progress",
            hp.img(_speedup_plot(data), "speedup vs eager of each candidate over time"),
            hp.img(_best_plot(data), "best speedup so far per candidate"),
        ),
        hp.section(
            "Edges",
            hp.paragraph(f"Edges taken: {_edge_line(data)}."),
            hp.img(_edges_plot(data), "count and timeline of the edges taken"),
        ),
        hp.section("Candidates", hp.html_table(CANDIDATE_HEADER, _candidate_rows(data))),
    ]
    return hp.page(title, sections)


def render_run_markdown(data: dict) -> str:
    return (
        "\n\n".join(
            [
                f"# kernelgraph run {data['run']['id']}",
                hp.md_table(["", "value"], _summary_rows(data)),
                f"## Edges\n\nEdges taken: {_edge_line(data)}.",
                "## Candidates\n\n" + hp.md_table(CANDIDATE_HEADER, _candidate_rows(data)),
            ]
        )
        + "\n"
    )
