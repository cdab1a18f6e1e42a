"""`branch`: fork a new run from any checkpoint of an earlier one.

The checkpoint is copied into a new thread (the new run's id), so the branch starts with the
state at that step, best so far included, while its budgets count anew. A branch that changes
the DSL or the device cannot reuse candidates written for the old one: it starts from the
nearest earlier checkpoint where the coder (or an earlier node) runs next, with the old
candidates and best dropped from its state. The run's baseline (eager and torch.compile times)
is kept too, unless the branch changes what is timed (sizes, precision, threads, device): then
the baseline and the best, measured under the old settings, are dropped and measured anew.
A finished run's last checkpoint has nothing left to run: a branch from it starts one step
earlier, so the last node runs again (its checks are cached) and its edge decides anew. A
branch keeps its run's graph (six nodes, or a parallel search).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelgraph.graph.build import graph_kind
from kernelgraph.graph.checkpoints import checkpoint_list
from kernelgraph.graph.errors import RunError
from kernelgraph.graph.progress import Progress
from kernelgraph.graph.runner import _open_run, drive, validate_config
from kernelgraph.graph.summary import RunSummary
from kernelgraph.state.checkpoint import open_checkpointer
from kernelgraph.state.config import RunConfig

RESTARTING = ("dsl", "device")  # settings that make old candidates meaningless
RETIMING = ("sets", "precision", "threads", "device")  # settings that change every timing
FRESH_TIMES = {"baseline": None, "best": None, "plateau": 0}
FRESH_CODER = {
    "best": None,
    "candidate_id": None,
    "parent_id": None,
    "outcome": None,
    "mode": "write",
    "attempts": 0,
    "plateau": 0,
    "recent_failures": [],
}


def branch(
    run_id: str,
    from_step: str,
    changes: dict[str, Any],
    db: Path | None = None,
    progress: Progress | None = None,
    on_start=None,
) -> RunSummary:
    store, row, config = _open_run(run_id, db)
    try:
        new_config = config.with_changes(changes)
    except (KeyError, ValueError) as exc:
        raise RunError(f"--config: {exc}") from exc
    validate_config(new_config)
    kind = graph_kind(config.search)
    if graph_kind(new_config.search) is not kind:
        raise RunError(
            f"run {run_id} is a {kind.name.replace('_', '-')} run: a branch keeps its graph, so "
            "--config width/islands may change only between values above 1 (or both stay 1)."
        )
    saver = open_checkpointer(store)
    points = checkpoint_list(kind.compile(saver), run_id, kind.state)
    chosen = _ran_last(points, _find(points, from_step, run_id))
    restart = _changed(config, new_config, RESTARTING)
    if restart:
        chosen = _before_coder(points, chosen, kind.name)
    source = saver.get_tuple(chosen.config)
    checkpoint = dict(source.checkpoint)
    fresh = (FRESH_CODER if restart else {}) | (
        FRESH_TIMES if _changed(config, new_config, RETIMING) else {}
    )
    checkpoint["channel_values"] = {**checkpoint["channel_values"], **fresh}
    new_id = store.create_run(
        kind="run",
        task_path=row["task_path"],
        task_hash=row["task_hash"],
        dsl=new_config.dsl,
        device=new_config.device,
        config=new_config.model_dump(mode="json"),
        parent_run_id=run_id,
        branched_from=chosen.checkpoint_id,
    )
    target = {"configurable": {"thread_id": new_id, "checkpoint_ns": ""}}
    saver.put(target, checkpoint, source.metadata, checkpoint.get("channel_versions", {}))
    store.update_run(new_id, status="running")
    if on_start:
        on_start(new_id)
    return drive(store, new_id, RunConfig.model_validate(new_config), None, progress)


def _changed(old: RunConfig, new: RunConfig, names: tuple[str, ...]) -> bool:
    return any(getattr(new, name) != getattr(old, name) for name in names)


def _find(points, from_step: str, run_id: str):
    for point in points:
        if str(point.step) == from_step or point.checkpoint_id.startswith(from_step or "-"):
            return point
    steps = ", ".join(str(p.step) for p in points) or "none"
    raise RunError(
        f"run {run_id} has no step or checkpoint {from_step!r} (steps: {steps}); "
        f"`kernelgraph history {run_id}` lists them."
    )


# Where a branch that changes the DSL or device may start: before any code was written (a
# search's islands hold candidates, so it restarts from its islands).
WRITES_NEXT = {"six_nodes": ("planner", "sketch_writer", "coder"), "search": ("planner", "islands")}


def _ran_last(points, chosen):
    """A run's final checkpoint has nothing left to run: branch from the one before it, so
    the last node runs again (its checks are cached) and its edge decides under the new
    settings."""
    if chosen.next or chosen.step <= 0:
        return chosen
    return next((p for p in reversed(points) if p.step < chosen.step and p.next), chosen)


def _before_coder(points, chosen, kind: str):
    for point in reversed(points):
        if point.step <= chosen.step and point.next in WRITES_NEXT[kind]:
            return point
    raise RunError("no earlier checkpoint runs the coder next; branch from an earlier step.")
