"""The graph as LangGraph's server (`langgraph dev`, LangGraph Studio) serves it: `make_graph`,
named in the checkout's langgraph.json.

The server invokes a graph with an input and a thread; it cannot call our runner. So this graph
is self-contained: `start` makes a run in the run store from the input (a task and run settings),
and `run` drives the six-node graph as its subgraph, with the RunContext its nodes need, through
the runner (`graph/runner.py`'s `drive`), so a Studio run records its candidates, evaluations,
spend and status in the run store like any run, and Studio draws and streams the six nodes.

Checkpointer: the server lends its own (in memory under `langgraph dev`) in the config and puts
it into whatever graph the factory returns, so there `make_graph` compiles none; called anywhere
else, it compiles with the run store's SqliteSaver (`state/checkpoint.py`). Either way the
subgraph's checkpoints go to the outer graph's thread, not to a thread named after the run:
`kernelgraph runs` and `show RUN --candidate ID` see a Studio run, `resume` and `history` do not.

Tracing: LangChain traces to LangSmith when LANGSMITH_TRACING=true and LANGSMITH_API_KEY are set
in the environment; kernelgraph sets neither, so tracing is off unless you turn it on. Harness
workers get an allow-listed environment (`tools/harness/sandbox.py`): the key never reaches them.

Imports are absolute (`kernelgraph....`): the server loads this file by its path.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, ConfigDict, Field

from kernelgraph.graph import runner
from kernelgraph.graph.build import compile_graph
from kernelgraph.state.checkpoint import open_checkpointer
from kernelgraph.state.config import ModelConfig, RunConfig
from kernelgraph.state.graph_state import GraphState
from kernelgraph.state.store import RunStore, open_store
from kernelgraph.tools.harness.verdict import UsageError

KERNEL = compile_graph()  # no checkpointer of its own: a subgraph uses its parent's


class StudioInput(BaseModel):
    """A run as Studio starts it: a task and its settings; `settings` takes any other setting
    by the name `kernelgraph branch --config` knows (max_iterations, seeds, approve, ...)."""

    model_config = ConfigDict(extra="forbid")

    task_path: str
    dsl: str = "cpp"
    device: str = "cpu"
    model: str = "builtin"  # as --model: builtin, script:FILE, replay:RUN or a model name
    sets: dict[str, Any] = Field(default_factory=dict)  # as --set NAME=VALUE
    settings: dict[str, Any] = Field(default_factory=dict)

    def run_config(self) -> RunConfig:
        config = RunConfig(
            task_path=self.task_path,
            sets=self.sets,
            dsl=self.dsl,
            device=self.device,
            model=ModelConfig(name=self.model),
        )
        try:
            config = config.with_changes(self.settings)
        except KeyError as exc:
            raise UsageError(str(exc.args[0])) from exc
        if config.search.parallel:
            raise UsageError(
                "Studio draws the six-node graph: a parallel search (width, islands) runs "
                "from the command line (kernelgraph run --width N --islands K)."
            )
        return config


class StudioOutput(BaseModel):
    run_id: str | None = None
    summary: dict[str, Any] | None = None  # the RunSummary that `kernelgraph run --json` prints


class StudioState(StudioInput, StudioOutput):
    pass


def store_for(config: RunnableConfig | None) -> RunStore:
    """The run store: the config's `db`, else $KERNELGRAPH_DB, else ./runs/kernelgraph.db."""
    return open_store(((config or {}).get("configurable") or {}).get("db"))


def start(state: StudioState, config: RunnableConfig) -> dict:
    run_config = state.run_config()
    runner.validate_config(run_config)
    return {"run_id": runner.new_run(store_for(config), run_config)}


def run(state: StudioState, config: RunnableConfig) -> dict:
    store = store_for(config)
    run_config = RunConfig.model_validate(store.get_run(state.run_id)["config"])
    try:
        summary = runner.drive(
            store, state.run_id, run_config, GraphState(), None, app=KERNEL, thread=config
        )
    except GraphInterrupt:  # the verifier waits for a human: Studio asks, then resumes
        store.update_run(state.run_id, status="awaiting_approval", stop_reason="awaiting_approval")
        raise
    return {"summary": summary.contract()}


def build_studio_graph() -> StateGraph:
    graph = StateGraph(StudioState, input_schema=StudioInput, output_schema=StudioOutput)
    graph.add_node("start", start)
    graph.add_node("run", run)
    graph.add_edge(START, "start")
    graph.add_edge("start", "run")
    graph.add_edge("run", END)
    return graph


def make_graph(config: RunnableConfig) -> CompiledStateGraph:
    """The server's graph factory (langgraph.json): called with each request's config."""
    lent = CONFIG_KEY_CHECKPOINTER in (config.get("configurable") or {})
    checkpointer = None if lent else open_checkpointer(store_for(config))
    return build_studio_graph().compile(checkpointer=checkpointer, name="kernelgraph")
