"""The state machine: six nodes and their conditional edges (see graph/routes.py).

planner -> sketch_writer -> coder -> compiler -> verifier -> profiler
                ^             ^  \\______|___________|          |
                |  escalate   |   retry (bounded)              | refine
                +-------------+--------------------------------+
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
from kernelgraph.state.search import SearchSettings, SearchState

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


def wired(graph: StateGraph, nodes: dict, edges: dict, first: str) -> StateGraph:
    """`graph` with `nodes`, an edge from START to `first`, and each node's routed edges."""
    for name, node in nodes.items():
        graph.add_node(name, node)
    graph.add_edge(START, first)
    for name, (route, destinations) in edges.items():
        graph.add_conditional_edges(name, route, destinations)
    return graph


def build_graph() -> StateGraph:
    return wired(StateGraph(GraphState, context_schema=RunContext), NODES, EDGES, "planner")


def compile_graph(checkpointer=None):
    return build_graph().compile(checkpointer=checkpointer)


@dataclass(frozen=True)
class GraphKind:
    """A graph a run can be: how to compile it, its state class, the nodes progress shows."""

    name: str
    compile: Callable[..., Any]
    state: type[GraphState]
    nodes: tuple[str, ...]


def _search_graph(checkpointer=None):
    from kernelgraph.graph.search import compile_search

    return compile_search(checkpointer)


GRAPH_KINDS = {
    "six_nodes": GraphKind("six_nodes", compile_graph, GraphState, tuple(NODES)),
    "search": GraphKind("search", _search_graph, SearchState, ("planner", "islands", "gather")),
}


def graph_kind(search: SearchSettings) -> GraphKind:
    """A run with --width or --islands above 1 is a parallel search; any other, six nodes."""
    return GRAPH_KINDS["search" if search.parallel else "six_nodes"]


def mermaid() -> str:
    return compile_graph().get_graph().draw_mermaid()
