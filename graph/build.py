"""The state machine: six nodes and their conditional edges (see graph/routes.py).

planner -> sketch_writer -> coder -> compiler -> verifier -> profiler
                ^             ^  \\______|___________|          |
                |  escalate   |   retry (bounded)              | refine
                +-------------+--------------------------------+
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from graph import routes
from nodes.coder import coder
from nodes.compiler import compiler
from nodes.context import RunContext
from nodes.planner import planner
from nodes.profiler import profiler
from nodes.sketch_writer import sketch_writer
from nodes.verifier import verifier
from state.graph_state import GraphState

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
