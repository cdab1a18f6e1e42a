"""planner: analyse the task (op graph, shapes, FLOPs and bytes, bound, speed-of-light) in a
sandboxed worker, then choose a strategy (what to fuse, what to write, what to leave to a
library call under the hybrid policy)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kernelgraph.nodes.checks import brain_stop
from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.llm import BadReply, BrainStop
from kernelgraph.nodes.prompt_context import base_context
from kernelgraph.state.graph_state import GraphState
from kernelgraph.tools.analysis import analyze_task


def planner(state: GraphState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    update: dict = {}
    if state.analysis_sha is None:
        ctx.emit("planner", "analysing the task")
        analysis = analyze_task(ctx.task(), ctx.config.device, ctx.config.timeout_s, ctx.eval_cache)
        update["analysis_sha"] = ctx.put_json(analysis, "analysis")
        state = state.model_copy(update=update)
    counts = dict(state.llm_calls)
    try:
        plan = ctx.brain.plan(base_context(ctx, state), counts)
    except (BadReply, BrainStop) as exc:
        ctx.emit("planner", str(exc))
        return update | brain_stop(state, exc, counts)
    ctx.emit("planner", plan.summary)
    return update | {"plan_sha": ctx.put_json(plan.model_dump(), "plan"), "llm_calls": counts}
