"""Readable terminal output for runs: the summary, the run list, history and a candidate."""

from __future__ import annotations

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from kernelgraph.graph.report import render_verdict
from kernelgraph.graph.summary import RunSummary
from kernelgraph.state.graph_state import Baseline
from kernelgraph.state.models import validate_verdict

STYLE = {"verified": "bold green", "no_verified_kernel": "bold yellow", "task_error": "bold red"}


def _x(value) -> str:
    return "—" if value is None else f"{value:.2f}x"


def render_summary(summary: RunSummary, console: Console | None = None) -> None:
    console = console or Console()
    style = STYLE.get(summary.status, "bold cyan")
    console.print(
        f"[{style}]{summary.status}[/] run {summary.run_id} ({summary.stop_reason})",
        highlight=False,
    )
    console.print(summary.message, highlight=False, markup=False)
    if summary.best:
        b = summary.best
        sol = "—" if b.sol_pct is None else f"{b.sol_pct:.1f}%"
        console.print(
            f"best {b.candidate_id}: {_x(b.speedup_vs_eager)} vs eager, "
            f"{_x(b.speedup_vs_compile)} vs torch.compile, {sol} of speed-of-light -> {b.path}",
            highlight=False,
        )
    s = summary.spend
    usd = "unknown" if s.usd is None else f"${s.usd:.4f}"
    console.print(
        f"spend: {s.llm_calls} LLM calls, {s.tokens_in} tokens in, {s.tokens_out} out, {usd}",
        highlight=False,
    )


def render_runs(console: Console, rows: list[dict]) -> None:
    table = Table("run", "created", "status", "stop", "dsl", "device", "task", box=None)
    for r in rows:
        table.add_row(
            r["run_id"], r["created_at"][:19], r["status"], r["stop_reason"] or "",
            r["dsl"], r["device"], r["task"],
        )  # fmt: skip
    console.print(table)


def render_history(console: Console, rows: list[dict]) -> None:
    """One row per checkpoint; a search run's rows say the round, each island's best and the
    archive's size instead of the current attempt and candidate."""
    search = any("round" in r for r in rows)
    middle = ("round", "island bests", "archive") if search else ("attempt", "candidate")
    table = Table("step", "checkpoint", "node", "next", *middle, "best", box=None)
    for r in rows:
        best = r["best_candidate"] or "—"
        if r["best_speedup_vs_eager"]:
            best += f" ({_x(r['best_speedup_vs_eager'])})"
        if search:
            bests = " ".join(f"{i}:{c or '—'}" for i, c in (r.get("islands") or {}).items())
            cells = (str(r.get("round", 0)), bests or "—", str(r.get("archive", 0)))
        else:
            cells = (str(r["attempt"]), r["candidate_id"] or "—")
        table.add_row(str(r["step"]), r["checkpoint_id"], r["node"], r["next"] or "(end)",
                      *cells, best)  # fmt: skip
    console.print(table)


def render_search(console: Console, search: dict) -> None:
    """A search run's islands after its last round, and its elite archive."""
    console.print(
        f"search: {search['round']} round(s), {len(search['islands'])} island(s), "
        f"{search['migrations']} migration(s), archive of {len(search['archive'])}",
        highlight=False,
    )
    table = Table("island", "best", "members", "written", "lanes without a kernel", box=None)
    for island in search["islands"]:
        best = island["best"] or "—"
        if island["best_speedup_vs_eager"]:
            best += f" ({_x(island['best_speedup_vs_eager'])})"
        table.add_row(str(island["island"]), best, str(len(island["members"])),
                      str(island["written"]), str(island["failed_lanes"]))  # fmt: skip
    console.print(table)


def render_baseline(console: Console, baseline: Baseline) -> None:
    eager = "—" if baseline.eager_ms is None else f"{baseline.eager_ms:.4f} ms"
    compiled = "—" if baseline.compile_ms is None else f"{baseline.compile_ms:.4f} ms"
    cached = " (cached baseline)" if baseline.cached else ""
    console.print(f"run baseline: eager {eager}, torch.compile {compiled}{cached}", highlight=False)


def render_speedups(console: Console, baseline: Baseline, kernel_ms: float) -> None:
    """The candidate against the run's baseline (its verdict shows what its own evaluation
    measured; the run compares candidates with these)."""
    console.print(
        f"against the run baseline: {_x(baseline.speedup(kernel_ms, 'eager'))} vs eager, "
        f"{_x(baseline.speedup(kernel_ms, 'compile'))} vs torch.compile",
        highlight=False,
    )


def render_show(console: Console, data: dict) -> None:
    run = data["run"]
    style = STYLE.get(run["status"], "bold cyan")
    console.print(
        f"run {run['id']}: [{style}]{run['status']}[/] ({run['stop_reason'] or '—'}), "
        f"{run['dsl']} on {run['device']}",
        highlight=False,
    )
    if data.get("baseline"):
        render_baseline(console, Baseline(**data["baseline"]))
    if data.get("search"):
        render_search(console, data["search"])
    cand = data["candidate"]
    if cand is None:
        console.print("no candidate yet")
        return
    tags = [
        t
        for t, on in (("best", data["is_best"]), ("awaiting approval", data["awaiting_approval"]))
        if on
    ]
    console.print(
        f"[bold]{cand['id']}[/] ({cand['label']}; parent {cand['parent_id'] or '—'})"
        + (f" ({', '.join(tags)})" if tags else ""),
        highlight=False,
    )
    console.print(Syntax(data["code"], "python", line_numbers=True))
    if data["diff"]:
        console.print("[bold]diff against the parent[/]")
        console.print(Syntax(data["diff"], "diff"))
    verdict = validate_verdict(data["verdict"]) if data["verdict"] else None
    if verdict is not None:
        render_verdict(console, verdict)
    else:
        console.print("not evaluated (it failed before the verifier)")
    if data.get("baseline") and verdict and verdict.timing.kernel_ms:
        render_speedups(console, Baseline(**data["baseline"]), verdict.timing.kernel_ms)
    for node, spend in sorted(data.get("spend_by_node", {}).items()):
        usd = "cost unknown" if spend.get("usd") is None else f"${spend['usd']:.4f}"
        console.print(
            f"{node}: {spend['llm_calls']} LLM calls, {spend['tokens_in']} tokens in, "
            f"{spend['tokens_out']} out, {usd}",
            highlight=False,
        )
