"""The conditional edges: retry, escalate, refine or stop.

`why_stop` is the single place that decides a run is over. It checks the state first and the
budgets last, so asking again later (for the run summary) gives the same reason the route saw.
"""

from __future__ import annotations

from langgraph.graph import END
from langgraph.runtime import Runtime

from kernelgraph.nodes.context import RunContext
from kernelgraph.state.config import LLM_NODES, Limits
from kernelgraph.state.graph_state import GraphState
from kernelgraph.state.search import SearchState

FAILED = {"compile_error", "incorrect", "rejected", "timeout", "crashed", "bad_reply", "duplicate"}
# Above this, a speed-of-light figure is not believable (e.g. a small task held in CPU caches
# against a DRAM bandwidth peak): it does not end a run.
SOL_BELIEVABLE_PCT = 110.0
TUNED = "tuned"  # the builtin's "nothing left to try"


def failed(state: GraphState) -> bool:
    outcome = state.outcome
    return outcome is not None and outcome.status in FAILED and outcome.stage != "human"


def state_stop(state: GraphState, limits: Limits) -> str | None:
    """A reason to stop that depends on the state alone."""
    if state.stop_reason:
        return state.stop_reason
    if isinstance(state, SearchState):
        return search_stop(state, limits)
    if failed(state):
        if state.iteration >= limits.max_iterations:
            return "max_iterations"
        if state.attempts >= limits.max_retries and state.escalations >= limits.max_escalations:
            return "retries_exhausted"
        return None
    outcome = state.outcome
    if outcome is not None and outcome.stage == "profiler" and state.best is not None:
        sol = state.best.sol_pct
        if sol is not None and limits.sol_target_pct <= sol <= SOL_BELIEVABLE_PCT:
            return "near_sol"
        if state.plateau >= limits.plateau_patience:
            return "plateau"
        if state.iteration >= limits.max_iterations:
            return "max_iterations"
    return None


def search_stop(state: SearchState, limits: Limits) -> str | None:
    """Between rounds: a lane's brain stop (the builtin's "tuned" only when no lane of the
    round wrote anything), near speed-of-light, a plateau of rounds, the iteration limit."""
    if state.round == 0:
        return None
    last = [r for r in state.results if r.round == state.round]
    wrote = any(r.written for r in last)
    for reason in sorted(r.stop_reason for r in last if r.stop_reason):
        if reason != TUNED or not wrote:
            return reason
    sol = state.best.sol_pct if state.best else None
    if sol is not None and limits.sol_target_pct <= sol <= SOL_BELIEVABLE_PCT:
        return "near_sol"
    if state.best is not None and state.plateau >= limits.plateau_patience:
        return "plateau"
    if state.iteration >= limits.max_iterations:
        return "max_iterations"
    return None


def budget_stop(spend: dict, minutes: float, limits: Limits) -> str | None:
    if limits.max_llm_calls is not None and spend.get("llm_calls", 0) >= limits.max_llm_calls:
        return "max_llm_calls"
    usd = spend.get("usd")
    if limits.budget_usd is not None and usd is not None and usd >= limits.budget_usd:
        return "budget_usd"
    if limits.max_minutes is not None and minutes >= limits.max_minutes:
        return "max_minutes"
    return None


def why_stop(state: GraphState, ctx: RunContext, going_to: str | None = None) -> str | None:
    """Why the run ends here, or None. Budgets only stop a run before an LLM node, so a
    candidate already written is still checked and profiled."""
    limits = ctx.config.limits
    reason = state_stop(state, limits)
    if reason or (going_to is not None and going_to not in LLM_NODES):
        return reason
    return budget_stop(ctx.brain.spend(), ctx.minutes(), limits)


def _go(state: GraphState, runtime: Runtime[RunContext], destination: str) -> str:
    return END if why_stop(state, runtime.context, destination) else destination


def _on_failure(state: GraphState, limits: Limits) -> str:
    if state.attempts >= limits.max_retries:
        return "sketch_writer"  # escalate: a new plan (state_stop caps how often)
    return "coder"


def _next(state: GraphState, runtime: Runtime[RunContext], on_success: str) -> str:
    limits = runtime.context.config.limits
    return _go(state, runtime, _on_failure(state, limits) if failed(state) else on_success)


def after_planner(state: GraphState, runtime: Runtime[RunContext]) -> str:
    return _go(state, runtime, "sketch_writer")


def after_sketch(state: GraphState, runtime: Runtime[RunContext]) -> str:
    return _go(state, runtime, "coder")


def after_coder(state: GraphState, runtime: Runtime[RunContext]) -> str:
    return _next(state, runtime, "compiler")


def after_compiler(state: GraphState, runtime: Runtime[RunContext]) -> str:
    return _next(state, runtime, "verifier")


def after_verifier(state: GraphState, runtime: Runtime[RunContext]) -> str:
    outcome = state.outcome
    if outcome is not None and outcome.stage == "human":
        return _go(state, runtime, "compiler" if outcome.status == "edited" else "coder")
    return _next(state, runtime, "profiler")


def after_profiler(state: GraphState, runtime: Runtime[RunContext]) -> str:
    return _next(state, runtime, "coder")


# ------------------------------------------------------------ a search branch (graph/search.py)
# One lane of a round: coder -> compiler -> verifier -> profiler, a failure retried from the
# failing candidate up to max_retries times; the round (nodes/gather.py) decides everything else.


def _lane_next(state: GraphState, runtime: Runtime[RunContext], on_success: str) -> str:
    limits = runtime.context.config.limits
    if state.stop_reason:
        return END
    if not failed(state):
        return on_success
    if state.attempts >= limits.max_retries:
        return END
    return (
        END
        if budget_stop(runtime.context.brain.spend(), runtime.context.minutes(), limits)
        else "coder"
    )


def lane_after_coder(state: GraphState, runtime: Runtime[RunContext]) -> str:
    return _lane_next(state, runtime, "compiler")


def lane_after_compiler(state: GraphState, runtime: Runtime[RunContext]) -> str:
    return _lane_next(state, runtime, "verifier")


def lane_after_verifier(state: GraphState, runtime: Runtime[RunContext]) -> str:
    return _lane_next(state, runtime, "profiler")


def lane_after_profiler(state: GraphState, runtime: Runtime[RunContext]) -> str:
    return _lane_next(state, runtime, END)
