"""compiler: the cheap gate. Static checks, then a compile (or compile-check) for the device's
target through the DSL adapter; failures go back to the coder as structured errors."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kernelgraph.nodes.checks import compile_gate, failure_outcome, failure_update
from kernelgraph.nodes.context import RunContext
from kernelgraph.state.graph_state import GraphState


def compiler(state: GraphState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    verdict = compile_gate(ctx, state.candidate_id)
    if verdict is None:
        return {"outcome": None}
    outcome = failure_outcome(ctx, state.candidate_id, verdict, "compiler")
    ctx.emit("compiler", f"{verdict.status}: {outcome.message}")
    return failure_update(state, outcome)
