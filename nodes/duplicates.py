"""A candidate that is an earlier one of the same run again (comments, docstrings and layout
aside) is not checked a second time: the coder hears which one it repeats and what it got."""

from __future__ import annotations

from kernelgraph.nodes.context import RunContext
from kernelgraph.state.graph_state import Lane
from kernelgraph.tools.code_hash import normalized_code_hash


def earlier_twin(ctx: RunContext, candidate_id: str, code: str, before: set[str]) -> str | None:
    """The earlier candidate this one repeats: another id with the same normalised code, or
    this very id (the same code from the same parent) once it has been evaluated. A candidate
    written but never checked (a run killed in between) is not a twin: resuming checks it."""
    if candidate_id in before:
        return candidate_id if ctx.store.evaluations_for_candidate(candidate_id) else None
    wanted = normalized_code_hash(code)
    for row in ctx.store.candidates_for_run(ctx.run_id):
        if row["id"] in before and row["id"] != candidate_id:
            twin = ctx.store.get_candidate(row["id"]) or {}
            if twin.get("code") is not None and normalized_code_hash(twin["code"]) == wanted:
                return row["id"]
    return None


def lane_twin(ctx: RunContext, lane: Lane | None, candidate_id: str, code: str) -> str | None:
    """The candidate another lane of this search wrote with the same code and may be checking
    right now (not yet in the store's evaluations); else this lane claims the code. Call it
    under `ctx.lane_lock`."""
    if lane is None:
        return None
    key = normalized_code_hash(code)
    owner = ctx.lane_claims.get(key)
    if owner is not None and owner[1] != lane.lane:
        return owner[0]
    ctx.lane_claims[key] = (candidate_id, lane.lane)
    return None


def twin_note(ctx: RunContext, twin_id: str) -> str:
    """One line: which candidate this repeats and how its last check went."""
    evaluations = ctx.store.evaluations_for_candidate(twin_id)
    if not evaluations:
        return f"the same kernel as candidate {twin_id} (comments and layout aside)"
    verdict = evaluations[-1].get("verdict") or {}
    speed = (verdict.get("timing") or {}).get("speedup_vs_eager")
    got = verdict.get("status", "checked") + (f", {speed:.2f}x vs eager" if speed else "")
    return f"the same kernel as candidate {twin_id} (comments and layout aside), which got: {got}"
