"""profiler: time a verified candidate (L2 flushed, medians, eager and torch.compile baselines
in the same session, % of speed-of-light) and keep the best one."""

from __future__ import annotations

from langgraph.runtime import Runtime

from nodes.checks import failure_outcome, failure_update, run_harness
from nodes.context import RunContext
from state.graph_state import Best, GraphState, Outcome


def profiler(state: GraphState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    candidate_id = state.candidate_id
    verdict, evaluation_id = run_harness(ctx, candidate_id, profile=True)
    kernel_ms = verdict.timing.kernel_ms
    if not verdict.passed or kernel_ms is None:
        outcome = failure_outcome(ctx, candidate_id, verdict, "profiler", evaluation_id)
        return failure_update(state, outcome)
    timing = verdict.timing
    mine = Best(
        candidate_id=candidate_id,
        kernel_ms=kernel_ms,
        speedup_vs_eager=timing.speedup_vs_eager,
        speedup_vs_compile=timing.speedup_vs_compile,
        sol_pct=verdict.sol_pct,
        evaluation_id=evaluation_id,
    )
    best = state.best
    gain = ctx.config.limits.min_gain_pct / 100.0
    real_gain = best is None or kernel_ms < best.kernel_ms * (1.0 - gain)
    if best is None or kernel_ms < best.kernel_ms:
        best = mine
    speedup = f"{timing.speedup_vs_eager:.2f}x" if timing.speedup_vs_eager else "?"
    label = " (interpreter timing)" if timing.timer == "triton_interpreter" else ""
    ctx.emit("profiler", f"{candidate_id}: {kernel_ms:.4f} ms, {speedup} vs eager{label}")
    outcome = Outcome(
        candidate_id=candidate_id,
        status="passed",
        stage="profiler",
        message=f"{kernel_ms:.4f} ms",
        evaluation_id=evaluation_id,
    )
    return {
        "outcome": outcome,
        "best": best,
        "profiled": state.profiled + 1,
        "plateau": 0 if real_gain else state.plateau + 1,
        "attempts": 0,
        "mode": "refine",
        "parent_id": best.candidate_id,
    }
