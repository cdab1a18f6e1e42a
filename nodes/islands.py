"""islands: one sketch per island; an LLM hears the other islands' strategies and is asked
for a different one."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kernelgraph.nodes.checks import brain_stop
from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.llm import BadReply, BrainStop
from kernelgraph.nodes.prompt_context import with_plan
from kernelgraph.nodes.search_select import strategy_of
from kernelgraph.state.search import Island, SearchState


def islands(state: SearchState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    settings = ctx.config.search
    counts = dict(state.llm_calls)
    made: list[Island] = []
    strategies: list[str] = []
    for index in range(settings.islands):
        context = with_plan(ctx, state) | {
            "previous_sketch": None,
            "failures": [],
            "island": index,
            "islands": settings.islands,
            "other_strategies": list(strategies),
            "lane": index,
        }
        try:
            sketch = ctx.brain.sketch(context, counts)
        except (BadReply, BrainStop) as exc:
            ctx.emit("islands", str(exc))
            return brain_stop(state, exc, counts)
        sketch_json = sketch.model_dump()
        strategies.append(strategy_of(sketch_json))
        made.append(Island(index=index, sketch_sha=ctx.put_json(sketch_json, "sketch")))
        ctx.emit("islands", f"island {index}: sketch of {len(sketch.stages)} stage(s)")
    return {"islands": made, "sketch_sha": made[0].sketch_sha, "sketch_rev": 1, "llm_calls": counts}
