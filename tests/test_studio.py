"""LangGraph Studio: the graph langgraph.json names loads as LangGraph's server loads it and runs
a builtin run to the end; tracing stays off unless asked for, and LangSmith's key reaches
neither a harness worker nor the run store."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path

import pytest
from agent_helpers import TASK
from cli_helpers import ROOT
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.types import Command
from test_sandbox import PROBE, run_script

from kernelgraph.state.store import RunStore

SECRETS = {
    "LANGSMITH_API_KEY": "lsv2-test-langsmith-5c7e1a9d3b",
    "LANGCHAIN_API_KEY": "lsv2-test-langchain-2b8f6e0a4c",
}
TRACING = ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING")
SIX_NODES = ("planner", "sketch_writer", "coder", "compiler", "verifier", "profiler")

# The task, which also writes the environment of each worker that imports it beside itself.
ENV_REPORT = """
import os
from pathlib import Path

Path(__file__).with_name(f"env-{os.getpid()}.txt").write_text(repr(dict(os.environ)))
"""


@pytest.fixture(scope="module")
def factory():
    """langgraph.json's graph, imported from its file under a name of its own, as the server
    imports it (never as kernelgraph.graph.studio)."""
    config = json.loads((ROOT / "langgraph.json").read_text())
    path, variable = config["graphs"]["kernelgraph"].rsplit(":", 1)
    name = "langgraph_server_graph_kernelgraph"
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield module.__dict__[variable]
    del sys.modules[name]


@pytest.fixture
def task(tmp_path: Path) -> Path:
    """tests/cases/tasks/scale_add.py with the environment report before it (the same text in
    every test, so the session's caches serve the second run)."""
    path = tmp_path / "task.py"
    path.write_text(ENV_REPORT + TASK.read_text())
    return path


@pytest.fixture
def keys_set_tracing_off(monkeypatch):
    """LangSmith's keys in this process's environment, and no tracing switch."""
    for name in TRACING:
        monkeypatch.delenv(name, raising=False)
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


def served(factory, db: Path, thread: str):
    """The graph as the server runs it: the factory gets the request's config, with the server's
    checkpointer lent in it, and the server puts that checkpointer into what it returns."""
    saver = InMemorySaver()
    thread_config = {"configurable": {"thread_id": thread, "db": str(db)}}
    graph = factory(
        {"configurable": {**thread_config["configurable"], CONFIG_KEY_CHECKPOINTER: saver}}
    )
    assert graph.checkpointer is None  # persistence is the server's
    return graph.copy(update={"checkpointer": saver}), thread_config


def task_input(task: Path, **settings) -> dict:
    return {"task_path": str(task), "settings": {"seeds": 1, "max_iterations": 1, **settings}}


def test_the_factory_is_one_the_server_calls_with_its_config(factory, tmp_path) -> None:
    (param,) = inspect.signature(factory).parameters.values()  # one: the RunnableConfig
    assert param.name == "config"
    graph, _ = served(factory, tmp_path / "runs.db", "t-1")
    drawn = graph.get_graph(xray=True)  # what Studio draws: start, then the six nodes
    assert {"start", *(f"run:{node}" for node in SIX_NODES)} <= set(drawn.nodes)
    assert set(graph.get_input_jsonschema()["required"]) == {"task_path"}


def test_a_builtin_run_ends_verified_through_the_served_graph(
    factory, task, keys_set_tracing_off, tmp_path
) -> None:
    """A run that stops for approval, is approved through the graph, and ends verified; no
    worker of it saw LangSmith's key, and tracing stayed off."""
    from langsmith.utils import tracing_is_enabled

    graph, thread = served(factory, tmp_path / "runs.db", "t-approve")
    waiting = graph.invoke(task_input(task, approve=True), thread)
    assert "__interrupt__" in waiting  # the verifier asks for a human
    run_id = graph.get_state(thread).values["run_id"]
    store = RunStore(tmp_path / "runs.db")
    assert store.get_run(run_id)["status"] == "awaiting_approval"

    done = graph.invoke(Command(resume={"action": "approve"}), thread)
    summary = done["summary"]
    assert done["run_id"] == run_id and summary["status"] == "verified"
    assert summary["best"]["speedup_vs_eager"] > 0
    assert Path(summary["best"]["path"]).is_file()
    assert store.get_run(run_id)["status"] == "verified"
    assert store.candidates_for_run(run_id)
    assert graph.get_state(thread).values["summary"] == summary

    reports = [path.read_text() for path in tmp_path.glob("env-*.txt")]
    assert reports  # workers imported the task and wrote their environment
    assert not any(value in report for value in SECRETS.values() for report in reports)
    assert not tracing_is_enabled()
    assert not {name for name in os.environ if name in TRACING}


def test_outside_the_server_the_factory_checkpoints_into_the_run_store(
    factory, task, keys_set_tracing_off, tmp_path
) -> None:
    db = tmp_path / "runs.db"
    thread = {"configurable": {"thread_id": "t-store", "db": str(db)}}
    done = factory(thread).invoke(task_input(task), thread)
    assert done["summary"]["status"] == "verified"
    # a graph the factory makes afresh reads the thread back from the run store's file
    again = factory(thread).get_state(thread, subgraphs=True)
    assert again.values["summary"] == done["summary"]
    assert RunStore(db).get_run(done["run_id"])["status"] == "verified"
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("runs.db*"))
    assert b"profiler" in stored  # the six nodes' checkpoints are in it
    assert not any(value.encode() in stored for value in SECRETS.values())


def test_a_sandboxed_worker_never_sees_langsmith_keys(keys_set_tracing_off, tmp_path) -> None:
    result, log = run_script(tmp_path, PROBE)
    assert result.returncode == 0, log
    assert "own environment:" in log and "probe done" in log
    for value in SECRETS.values():
        assert value not in log


def test_a_parallel_search_is_refused_with_a_way_forward(tmp_path) -> None:
    from kernelgraph.graph.studio import StudioInput
    from kernelgraph.tools.harness.verdict import UsageError

    given = StudioInput(task_path=str(tmp_path / "task.py"), settings={"width": 4})
    with pytest.raises(UsageError, match="kernelgraph run --width N"):
        given.run_config()
