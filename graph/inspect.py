"""Looking at runs: list, history, show, export and delete (no graph is run)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from kernelgraph.graph.build import graph_kind
from kernelgraph.graph.checkpoints import checkpoint_list
from kernelgraph.graph.errors import RunError
from kernelgraph.graph.runner import _open_run, _thread, as_state, spend_of
from kernelgraph.state import run_lock
from kernelgraph.state.checkpoint import open_checkpointer
from kernelgraph.state.llm_calls import node_spend
from kernelgraph.state.search import SearchSettings, SearchState
from kernelgraph.state.store import RunStore, open_store


def list_runs(db: Path | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    store = open_store(db)
    rows = []
    for run in store.list_runs(limit):
        if run["kind"] != "run":
            continue
        rows.append(
            {
                "run_id": run["id"],
                "created_at": run["created_at"],
                "status": live_status(run),
                "stop_reason": run["stop_reason"],
                "dsl": run["dsl"],
                "device": run["device"],
                "task": run["task_path"],
                "parent_run_id": run["parent_run_id"],
            }
        )
    return rows


def live_status(run: dict) -> str:
    """A run marked running whose process is gone (killed, crashed) is interrupted."""
    if run["status"] == "running" and not run_lock.held_by_live_process(run):
        return "interrupted"
    return run["status"]


def history(run_id: str, db: Path | None = None) -> list[dict[str, Any]]:
    store, _, config = _open_run(run_id, db)
    kind = graph_kind(config.search)
    return [
        p.row() for p in checkpoint_list(kind.compile(open_checkpointer(store)), run_id, kind.state)
    ]


def run_state(store: RunStore, run_id: str, search: SearchSettings):
    kind = graph_kind(search)
    snapshot = kind.compile(open_checkpointer(store)).get_state(_thread(run_id))
    return as_state(snapshot.values, kind.state), snapshot


def show(run_id: str, candidate_id: str | None = None, db: Path | None = None) -> dict:
    """The run (status, baseline, spend) and a candidate (default: the best, else the latest)
    with its code, parent diff and verdict; `candidate` is None while the run has none."""
    store, row, config = _open_run(run_id, db)
    state, snapshot = run_state(store, run_id, config.search)
    pending = snapshot.interrupts[0].value["candidate_id"] if snapshot.interrupts else None
    data = {
        "run": {k: row[k] for k in ("id", "stop_reason", "dsl", "device")}
        | {"status": live_status(row)},
        "spend": spend_of(store, run_id),
        "spend_by_node": node_spend(store, run_id),
        "baseline": state.baseline.model_dump() if state.baseline else None,
        "awaiting_approval": bool(snapshot.interrupts),
        "search": search_summary(state) if isinstance(state, SearchState) else None,
        "candidates": [
            {k: c[k] for k in ("id", "parent_id", "label")}
            for c in store.candidates_for_run(run_id)
        ],
    }
    if candidate_id is None:
        candidate_id = pending or (state.best.candidate_id if state.best else state.candidate_id)
    if candidate_id is None:
        return data | {
            "candidate": None,
            "is_best": False,
            "code": None,
            "diff": "",
            "verdict": None,
        }
    cand = store.get_candidate(candidate_id)
    if cand is None:
        raise RunError(f"no candidate {candidate_id!r}; `kernelgraph show {run_id}` lists them.")
    parent = store.get_candidate(cand["parent_id"]) if cand["parent_id"] else None
    evaluations = store.evaluations_for_candidate(cand["id"])
    return data | {
        "candidate": {k: cand[k] for k in ("id", "dsl", "parent_id", "label", "created_at")},
        "is_best": bool(state.best and state.best.candidate_id == cand["id"]),
        "code": cand["code"],
        "diff": _diff(parent, cand),
        "verdict": evaluations[-1]["verdict"] if evaluations else None,
    }


def search_summary(state: SearchState) -> dict:
    """A search run's rounds, islands (best, members, lanes' work) and elite archive."""
    baseline = state.baseline
    islands = []
    for island in state.islands:
        best = island.best()
        islands.append(
            {
                "island": island.index,
                "best": best.candidate_id if best else None,
                "best_speedup_vs_eager": baseline.speedup(best.kernel_ms, "eager")
                if best and baseline
                else None,
                "members": [m.candidate_id for m in island.members],
                "written": island.written,
                "failed_lanes": island.failures,
            }
        )
    return {
        "round": state.round,
        "islands": islands,
        "archive": [m.model_dump() for m in state.archive],
        "migrations": state.migrations,
    }


def export(run_id: str, out: Path, candidate_id: str | None = None, db=None) -> Path:
    store, _, config = _open_run(run_id, db)
    state, _ = run_state(store, run_id, config.search)
    chosen = candidate_id or (state.best.candidate_id if state.best else None)
    if chosen is None:
        raise RunError(
            f"run {run_id} has no verified kernel to export (`--candidate ID` picks any)."
        )
    cand = store.get_candidate(chosen)
    if cand is None:
        raise RunError(f"no candidate {chosen!r}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(cand["code"])
    return out


def delete(run_id: str, db: Path | None = None) -> None:
    store, row, _ = _open_run(run_id, db)
    try:
        run_lock.acquire(store, run_id)  # refuses while a live process works on it
    except run_lock.RunLocked as exc:
        raise RunError(str(exc)) from exc
    saver = open_checkpointer(store)
    saver.delete_thread(run_id)
    store.delete_run(run_id)


def unlock(run_id: str, db: Path | None = None) -> None:
    store, _, _ = _open_run(run_id, db)
    run_lock.force_release(store, run_id)


def _diff(parent: dict | None, cand: dict) -> str:
    if parent is None:
        return ""
    lines = difflib.unified_diff(
        parent["code"].splitlines(keepends=True),
        cand["code"].splitlines(keepends=True),
        fromfile=parent["id"],
        tofile=cand["id"],
    )
    return "".join(lines)
