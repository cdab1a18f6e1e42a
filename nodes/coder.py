"""coder: write the candidate (`class ModelNew` in the target DSL) from the sketch and the DSL's
docs; on a retry it also sees the previous code and the failure record, on a refine the
profile and the best so far, on a rejection the reviewer's words. An LLM also sees verified
kernels of similar tasks from the kernel library (tools/retrieval/). The model may answer
with a whole file or with targeted edits (the LLM layer falls back to a rewrite when an edit
does not apply)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kernelgraph.nodes.checks import brain_stop, candidate_code, compile_ahead, failure_update
from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.duplicates import earlier_twin, lane_twin, twin_note
from kernelgraph.nodes.llm import BadReply, BrainStop
from kernelgraph.nodes.prompt_context import retrieved, with_plan
from kernelgraph.state.graph_state import GraphState, Lane, Outcome


def coder(state: GraphState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    previous = candidate_code(ctx, state.parent_id) if state.parent_id else None
    context = with_plan(ctx, state) | {
        "sketch": ctx.get_json(state.sketch_sha) or {},
        "mode": state.mode if previous else "write",
        "previous_code": previous,
        "failure": _failure(ctx, state),
        "profile": _profile(ctx, state),
        "best": state.best.model_dump() if state.best else None,
        "feedback": ctx.store.get_blob(state.feedback_sha) if state.feedback_sha else None,
        "allow_edit": previous is not None,
    }
    context["retrieved"] = retrieved(ctx, context["analysis"])  # the kernel library's examples
    context |= lane_context(ctx, state.lane)
    counts = dict(state.llm_calls)
    try:
        answer = ctx.brain.code(context, counts, previous)
    except BrainStop as exc:
        ctx.emit("coder", str(exc))
        return brain_stop(state, exc, counts)
    except BadReply as exc:
        ctx.emit("coder", f"bad reply: {exc}")
        outcome = Outcome(status="bad_reply", stage="coder", message=str(exc))
        return {
            "llm_calls": counts,
            "outcome": outcome,
            "attempts": state.attempts + 1,
            "recent_failures": [*state.recent_failures, f"bad reply: {exc}"][-5:],
        }
    iteration = state.iteration + 1
    with ctx.lane_lock:  # lanes of a search write at once: one twin check at a time
        before = {row["id"] for row in ctx.store.candidates_for_run(ctx.run_id)}
        candidate_id = ctx.store.add_candidate(
            answer.code,
            ctx.config.dsl,
            run_id=ctx.run_id,
            parent_id=state.parent_id,
            label=f"{lane_tag(state.lane)}{context['mode']} #{iteration} ({answer.kind})",
        )
        twin = earlier_twin(ctx, candidate_id, answer.code, before) or lane_twin(
            ctx, state.lane, candidate_id, answer.code
        )
    ctx.emit("coder", f"candidate {candidate_id} ({context['mode']}, {answer.kind})")
    if twin:
        return _duplicate(ctx, state, candidate_id, twin, iteration, counts)
    if ctx.prebuilder is not None and state.lane is None:  # the next files compile meanwhile
        # (a search compiles its round's lanes at once instead)
        upcoming = ctx.brain.upcoming(context, ctx.prebuilder.workers)
        compile_ahead(ctx, upcoming, (context["analysis"] or {}).get("min_bytes"))
    return {
        "candidate_id": candidate_id,
        "iteration": iteration,
        "outcome": None,
        "feedback_sha": None,
        "llm_calls": counts,
    }


def lane_tag(lane: Lane | None) -> str:
    """The label prefix of a search lane's candidates: round, island and lane."""
    return "" if lane is None else f"r{lane.round} i{lane.island} l{lane.lane}: "


def lane_context(ctx: RunContext, lane: Lane | None) -> dict:
    """What a search lane adds: its lane (a script's reply list), which of a parent's next
    files to write (`pick`), the builtin's starting point for an empty island, and another
    island's best kernel as an inspiration for an LLM."""
    if lane is None:
        return {}
    inspiration = candidate_code(ctx, lane.inspiration_id) if lane.inspiration_id else None
    return {"lane": lane.lane, "island": lane.island, "round": lane.round, "pick": lane.pick,
            "start": lane.start, "inspiration": inspiration}  # fmt: skip


def _failure(ctx: RunContext, state: GraphState) -> dict | None:
    outcome = state.outcome
    if state.mode != "retry" or outcome is None or outcome.report_sha is None:
        return None
    return ctx.get_json(outcome.report_sha)


def _profile(ctx: RunContext, state: GraphState) -> dict | None:
    if state.mode != "refine" or state.best is None or state.best.evaluation_id is None:
        return None
    row = ctx.store.get_evaluation(state.best.evaluation_id) or {}
    timing = (row.get("verdict") or {}).get("timing") or {}
    sol = (row.get("verdict") or {}).get("sol") or {}
    return {
        "kernel_ms": timing.get("kernel_ms"),
        "eager_ms": timing.get("eager_ms"),
        "speedup_vs_eager": timing.get("speedup_vs_eager"),
        "sol_pct": row.get("sol_pct"),
        "bound": sol.get("bound"),
        "timer": timing.get("timer"),
    }


def _duplicate(ctx: RunContext, state: GraphState, candidate_id: str, twin: str, iteration: int,
               counts: dict[str, int]) -> dict:  # fmt: skip
    """Not checked again: a failed attempt, and the coder's next prompt says what it repeats."""
    note = f"{twin_note(ctx, twin)}; write a different kernel"
    ctx.emit("coder", f"duplicate: {note}")
    record = {"status": "duplicate", "message": note, "detail": note}
    outcome = Outcome(candidate_id=candidate_id, status="duplicate", stage="coder",
                      message=note, report_sha=ctx.put_json(record, "failure"))  # fmt: skip
    update = failure_update(state, outcome)
    return update | {"iteration": iteration, "llm_calls": counts, "feedback_sha": None}
