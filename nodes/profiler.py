"""profiler: time a verified candidate (L2 flushed, medians, % of speed-of-light) and keep the
best one.

Speedups are against the run's one baseline: the eager and torch.compile times measured with
the first profiled candidate (GraphState.baseline). Timing eager again for every candidate made
speedups drift with the noise of eager (a profile line said 0.73x while the best stayed 0.68x);
the verdicts in the store keep what each evaluation measured.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from kernelgraph.nodes.checks import failure_outcome, failure_update, run_harness
from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.prompt_context import remember_kernel
from kernelgraph.state.graph_state import Baseline, Best, GraphState, Outcome
from kernelgraph.tools.harness.verdict import Timing


def run_baseline(known: Baseline | None, timing: Timing) -> Baseline:
    """The run's baseline after this timing: the first measurement of each time, kept for good
    (a time the first one lacked, e.g. torch.compile after a branch turned it on, is added)."""
    if known is None:
        return Baseline(
            eager_ms=timing.eager_ms,
            compile_ms=timing.torch_compile_ms,
            cached=timing.baseline_cached,
        )
    missing = {
        name: value
        for name, value in (("eager_ms", timing.eager_ms), ("compile_ms", timing.torch_compile_ms))
        if getattr(known, name) is None and value is not None
    }
    return known.model_copy(update=missing) if missing else known


def profiler(state: GraphState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    candidate_id = state.candidate_id
    verdict, evaluation_id = run_harness(ctx, candidate_id, profile=True)
    kernel_ms = verdict.timing.kernel_ms
    if not verdict.passed or kernel_ms is None:
        outcome = failure_outcome(ctx, candidate_id, verdict, "profiler", evaluation_id)
        return failure_update(state, outcome)
    baseline = run_baseline(state.baseline, verdict.timing)
    mine = Best(
        candidate_id=candidate_id,
        kernel_ms=kernel_ms,
        speedup_vs_eager=baseline.speedup(kernel_ms, "eager"),
        speedup_vs_compile=baseline.speedup(kernel_ms, "compile"),
        sol_pct=verdict.sol_pct,
        evaluation_id=evaluation_id,
    )
    remember_kernel(ctx, state, mine, verdict)  # the kernel library learns every verified kernel
    best = state.best
    gain = ctx.config.limits.min_gain_pct / 100.0
    real_gain = best is None or kernel_ms < best.kernel_ms * (1.0 - gain)
    if best is None or kernel_ms < best.kernel_ms:
        best = mine
    ctx.emit("profiler", _profile_line(mine, baseline, verdict.timing.timer))
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
        "baseline": baseline,
        "profiled": state.profiled + 1,
        "last_profiled": mine,
        "plateau": 0 if real_gain else state.plateau + 1,
        "attempts": 0,
        "mode": "refine",
        "parent_id": best.candidate_id,
    }


def _profile_line(mine: Best, baseline: Baseline, timer: str | None) -> str:
    speedup = f"{mine.speedup_vs_eager:.2f}x" if mine.speedup_vs_eager else "?"
    line = f"{mine.candidate_id}: {mine.kernel_ms:.4f} ms, {speedup} vs eager"
    if mine.speedup_vs_compile:
        line += f", {mine.speedup_vs_compile:.2f}x vs torch.compile"
    if baseline.cached:
        line += " (cached baseline)"
    if timer == "triton_interpreter":
        line += " (interpreter timing)"
    return line
