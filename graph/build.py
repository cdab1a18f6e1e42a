"""The state machine: six nodes and their conditional edges (see graph/routes.py).

planner -> sketch_writer -> coder -> compiler -> verifier -> profiler
                ^             ^  \\______|___________|          |
                |  escalate   |   retry (bounded)              | refine
                +-------------+--------------------------------+
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from kernelgraph.graph import routes
from kernelgraph.nodes.coder import coder
from kernelgraph.nodes.compiler import compiler
from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.planner import planner
from kernelgraph.nodes.profiler import profiler
from kernelgraph.nodes.sketch_writer import sketch_writer
from kernelgraph.nodes.verifier import verifier
from kernelgraph.state.graph_state import GraphState

NODES = {
    "planner": planner,
    "sketch_writer": sketch_writer,
    "coder": coder,
    "compiler": compiler,
    "verifier": verifier,
    "profiler": profiler,
}
EDGES = {
    "planner": (routes.after_planner, ["sketch_writer", END]),
    "sketch_writer": (routes.after_sketch, ["coder", END]),
    "coder": (routes.after_coder, ["compiler", "coder", "sketch_writer", END]),
    "compiler": (routes.after_compiler, ["verifier", "coder", "sketch_writer", END]),
    "verifier": (
        routes.after_verifier,
        ["profiler", "compiler", "coder", "sketch_writer", END],
    ),
    "profiler": (routes.after_profiler, ["coder", "sketch_writer", END]),
}


def build_graph() -> StateGraph:
    graph = StateGraph(GraphState, context_schema=RunContext)
    for name, node in NODES.items():
        graph.add_node(name, node)
    graph.add_edge(START, "planner")
    for name, (route, destinations) in EDGES.items():
        graph.add_conditional_edges(name, route, destinations)
    return graph


def compile_graph(checkpointer=None):
    return build_graph().compile(checkpointer=checkpointer)


def mermaid() -> str:
    return compile_graph().get_graph().draw_mermaid()
