"""verifier: harness verification (seeds, tolerances, reward-hack guards). With approval on,
a passing candidate waits here for a human: approve, reject with feedback, or edit.

Everything before `interrupt()` runs again when the run continues, so it must be idempotent:
the verification is cached, so the second run reads the stored verdict."""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from kernelgraph.nodes.checks import failure_outcome, failure_update, run_harness
from kernelgraph.nodes.context import RunContext
from kernelgraph.state.graph_state import GraphState, Outcome


def verifier(state: GraphState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    candidate_id = state.candidate_id
    verdict, evaluation_id = run_harness(ctx, candidate_id, profile=False)
    if not verdict.passed:
        outcome = failure_outcome(ctx, candidate_id, verdict, "verifier", evaluation_id)
        ctx.emit("verifier", f"{verdict.status}: {outcome.message}")
        return failure_update(state, outcome)
    passed = Outcome(
        candidate_id=candidate_id,
        status="passed",
        stage="verifier",
        message=verdict.message,
        evaluation_id=evaluation_id,
    )
    ctx.emit("verifier", f"{candidate_id} verified")
    if not ctx.config.approve or candidate_id in state.human_approved:
        return {"outcome": passed, "attempts": 0}
    decision = interrupt(
        {
            "run_id": ctx.run_id,
            "candidate_id": candidate_id,
            "parent_id": state.parent_id,
            "evaluation_id": evaluation_id,
        }
    )
    return _decide(ctx, state, passed, decision or {})


def _decide(ctx: RunContext, state: GraphState, passed: Outcome, decision: dict) -> dict:
    action = decision.get("action")
    candidate_id = state.candidate_id
    if action == "approve":
        return {"outcome": passed, "attempts": 0}
    if action == "reject":
        feedback = decision.get("feedback") or "rejected by the reviewer"
        outcome = Outcome(
            candidate_id=candidate_id, status="rejected", stage="human", message=feedback
        )
        return {
            "outcome": outcome,
            "feedback_sha": ctx.store.put_blob(feedback, "feedback"),
            "mode": "feedback",
            "parent_id": candidate_id,
        }
    if action == "edit":
        code = ctx.store.get_blob(decision["code_sha"])
        edited = ctx.store.add_candidate(
            code, ctx.config.dsl, run_id=ctx.run_id, parent_id=candidate_id, label="human edit"
        )
        outcome = Outcome(candidate_id=edited, status="edited", stage="human", message="edit")
        return {
            "candidate_id": edited,
            "outcome": outcome,
            "human_approved": [*state.human_approved, edited],
        }
    raise ValueError(f"unknown review decision {decision!r}")
