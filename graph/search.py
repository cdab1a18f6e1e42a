"""The parallel search graph (`--width N`, `--islands K`): rounds of N branches fanned out
with LangGraph's Send and gathered back.

planner -> islands -> Send x N -> branch -> gather -> Send x N -> branch -> ... -> END

A branch runs the six-node graph's coder -> compiler -> verifier -> profiler chain (with its
retry edge) as a subgraph, checkpointed under its own namespace, so a run killed mid-round
resumes the unfinished branches where they were and never re-runs a finished one (its result
is a pending write of the round's step).
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from kernelgraph.graph import routes
from kernelgraph.graph.build import wired
from kernelgraph.graph.search_round import gather
from kernelgraph.nodes.coder import coder, lane_tag
from kernelgraph.nodes.compiler import compiler
from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.islands import islands
from kernelgraph.nodes.planner import planner
from kernelgraph.nodes.profiler import profiler
from kernelgraph.nodes.search_select import plan_round
from kernelgraph.nodes.verifier import verifier
from kernelgraph.state.graph_state import Best, GraphState, Lane
from kernelgraph.state.search import BranchInput, LaneResult, SearchState

LANE_EDGES = {
    "coder": (routes.lane_after_coder, ["compiler", "coder", END]),
    "compiler": (routes.lane_after_compiler, ["verifier", "coder", END]),
    "verifier": (routes.lane_after_verifier, ["profiler", "coder", END]),
    "profiler": (routes.lane_after_profiler, ["coder", END]),
}
LANE_NODES = {"coder": coder, "compiler": compiler, "verifier": verifier, "profiler": profiler}


def build_lane() -> StateGraph:
    return wired(StateGraph(GraphState, context_schema=RunContext), LANE_NODES, LANE_EDGES, "coder")


LANE = build_lane().compile()  # no checkpointer of its own: it checkpoints in its parent's


def branch(given: BranchInput, runtime: Runtime[RunContext]) -> dict:
    """One lane of a round, to its end; its result goes to the round's list."""
    ctx = runtime.context
    lane = given.lane
    lane_ctx = ctx.for_lane(lane_tag(lane).rstrip(": "))
    final = LANE.invoke(given.start, context=lane_ctx)
    state = final if isinstance(final, GraphState) else GraphState.model_validate(final)
    result = LaneResult(
        lane=lane.lane,
        island=lane.island,
        round=lane.round,
        written=state.iteration - given.start.iteration,
        profiled=state.last_profiled,  # the start has none: this lane's own
        baseline=state.baseline,
        outcome=state.outcome,
        failures=state.recent_failures[-3:],
        stop_reason=state.stop_reason,
        llm_calls={k: v for k, v in state.llm_calls.items() if "#" in k},
    )
    return {"results": [result]}


def fan_out(state: SearchState, runtime: Runtime[RunContext]) -> list[Send] | str:
    """The next round's branches, one Send each; END when the search stops (the same reason
    the run summary gives: routes.why_stop). A pure function of the state and the settings, so
    a resume or a branch from this checkpoint (with new limits) plans the same way."""
    ctx = runtime.context
    if routes.why_stop(state, ctx, "coder"):
        return END
    width = min(ctx.config.search.width, ctx.config.limits.max_iterations - state.iteration)
    lanes = plan_round(ctx.config.search, state.islands, state.archive, state.round + 1, width)
    return [Send("branch", BranchInput(lane=lane, start=lane_start(state, lane)))
            for lane in lanes]  # fmt: skip


def lane_start(state: SearchState, lane: Lane) -> GraphState:
    """The six-node state a branch starts from: its island's sketch, its parent as the best
    to refine, the run's baseline."""
    island = state.islands[lane.island]
    parent = next((m for i in state.islands for m in i.members
                   if m.candidate_id == lane.parent_id), None)  # fmt: skip
    best = None
    if parent is not None:
        best = Best(candidate_id=parent.candidate_id, kernel_ms=parent.kernel_ms,
                    sol_pct=parent.sol_pct, evaluation_id=parent.evaluation_id)  # fmt: skip
        if state.baseline is not None:
            best.speedup_vs_eager = state.baseline.speedup(parent.kernel_ms, "eager")
            best.speedup_vs_compile = state.baseline.speedup(parent.kernel_ms, "compile")
    return GraphState(
        analysis_sha=state.analysis_sha,
        plan_sha=state.plan_sha,
        sketch_sha=island.sketch_sha,
        sketch_rev=1,
        parent_id=lane.parent_id,
        mode=lane.mode,
        iteration=state.iteration + lane.lane,
        best=best,
        baseline=state.baseline,
        llm_calls=dict(state.llm_calls),
        lane=lane,
    )


def after_planner(state: SearchState) -> str:
    return END if state.stop_reason else "islands"


def build_search() -> StateGraph:
    graph = StateGraph(SearchState, context_schema=RunContext)
    graph.add_node("planner", planner)
    graph.add_node("islands", islands)
    graph.add_node("branch", branch)
    graph.add_node("gather", gather)
    graph.add_edge(START, "planner")
    graph.add_conditional_edges("planner", after_planner, ["islands", END])
    graph.add_conditional_edges("islands", fan_out, ["branch", END])
    graph.add_edge("branch", "gather")
    graph.add_conditional_edges("gather", fan_out, ["branch", END])
    return graph


def compile_search(checkpointer=None):
    return build_search().compile(checkpointer=checkpointer)
