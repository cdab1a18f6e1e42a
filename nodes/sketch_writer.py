"""sketch_writer: a DSL-neutral Sketch (stages, grid, tiling, memory, reduction, precision,
pseudo-code); on escalation, a new sketch that avoids what made the last one fail."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kernelgraph.nodes.checks import brain_stop
from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.llm import BadReply, BrainStop
from kernelgraph.nodes.prompt_context import with_plan
from kernelgraph.state.graph_state import GraphState


def sketch_writer(state: GraphState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    escalating = state.sketch_rev > 0
    context = with_plan(ctx, state) | {
        "previous_sketch": ctx.get_json(state.sketch_sha) if escalating else None,
        "failures": list(state.recent_failures) if escalating else [],
    }
    counts = dict(state.llm_calls)
    try:
        sketch = ctx.brain.sketch(context, counts)
    except (BadReply, BrainStop) as exc:
        ctx.emit("sketch_writer", str(exc))
        return brain_stop(state, exc, counts)
    ctx.emit("sketch_writer", f"sketch {state.sketch_rev + 1}: {len(sketch.stages)} stage(s)")
    return {
        "sketch_sha": ctx.put_json(sketch.model_dump(), "sketch"),
        "sketch_rev": state.sketch_rev + 1,
        "escalations": state.escalations + (1 if escalating else 0),
        "attempts": 0,
        "recent_failures": [],
        "mode": "refine" if state.best else "write",
        "parent_id": state.best.candidate_id if state.best else None,
        "outcome": None,
        "llm_calls": counts,
    }
