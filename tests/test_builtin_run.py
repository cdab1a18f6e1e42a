"""`kernelgraph run` with the builtin model through the real graph: no LLM, checkpointed,
resumable, tuning on the refine edge, and an honest stop for what it cannot write."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from agent_helpers import TASK, Agent, summary_of
from cli_helpers import ROOT, json_line

SOFTMAX = ROOT / "examples" / "softmax" / "task.py"
SMALL = ["--set", "ROWS=16", "--set", "COLS=64", "--seeds", "1"]


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    return Agent(tmp_path, env={"KERNELGRAPH_MODEL": "", "KERNELGRAPH_BASE_URL": ""})


def test_builtin_run_verifies_a_triton_kernel_with_no_llm(agent: Agent) -> None:
    proc = agent("run", str(SOFTMAX), "--dsl", "triton", "--device", "cpu", *SMALL, "--json")
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    summary = summary_of(proc)
    assert summary["status"] == "verified" and summary["spend"]["llm_calls"] == 0
    # under the interpreter there is nothing to tune: one kernel, then a clean stop
    assert summary["stop_reason"] == "tuned"
    assert "(interpreter timing)" in proc.stderr
    history = agent("history", summary["run_id"], "--json")
    nodes = [row["node"] for row in json_line(history)]
    for node in ("planner", "sketch_writer", "coder", "compiler", "verifier", "profiler"):
        assert node in nodes
    best = Path(summary["best"]["path"]).read_text()
    assert best.startswith("# kernelgraph-builtin config:") and "@triton.jit" in best


def test_builtin_run_stops_for_approval_and_resumes_in_another_process(agent: Agent) -> None:
    args = ["run", str(SOFTMAX), "--dsl", "triton", "--device", "cpu", *SMALL]
    waiting = agent(*args, "--approve", "--json")
    assert waiting.returncode == 3, waiting.stderr
    summary = summary_of(waiting)
    assert summary["status"] == "awaiting_approval"
    done = agent("approve", summary["run_id"], "--json")
    assert done.returncode == 0, done.stderr
    assert summary_of(done)["status"] == "verified"


def test_builtin_tunes_cpp_on_the_refine_edge(agent: Agent) -> None:
    """Each refine step tries another config next to the best; no config is tried twice."""
    proc = agent("run", str(TASK), "--dsl", "cpp", "--device", "cpu", "--seeds", "1",
                 "--max-iterations", "3", "--sol-target-pct", "1e9", "--json")  # fmt: skip
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    run_id = summary_of(proc)["run_id"]
    heads = [row[0].splitlines()[0] for row in agent.query(
        "SELECT b.content FROM candidates c JOIN blobs b ON b.sha256 = c.code_sha "
        "WHERE c.run_id = ?",
        run_id)]  # fmt: skip
    assert len(heads) >= 2 and len(set(heads)) == len(heads)


def test_an_op_the_builtin_cannot_write_ends_the_run_with_its_name(agent: Agent, tmp_path) -> None:
    task = tmp_path / "sort.py"
    task.write_text(
        textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return torch.sort(x, dim=1).values

        def get_inputs():
            return [torch.randn(4, 8)]

        def get_init_inputs():
            return []
    """)
    )
    proc = agent("run", str(task), "--dsl", "triton", "--device", "cpu", "--json")
    assert proc.returncode == 1, proc.stderr
    summary = summary_of(proc)
    assert summary["status"] == "no_verified_kernel"
    assert summary["stop_reason"] == "builtin_unsupported"
    assert "aten.sort" in summary["message"] and "--model" in summary["message"]
    assert "Traceback" not in proc.stderr


def test_a_builtin_bug_ends_the_run_as_unwritable_with_the_way_on(tmp_path, monkeypatch) -> None:
    """An exception inside the builtin model (not Unsupported) stops the run as
    builtin_unsupported with a readable reason, not as an internal error; KERNELGRAPH_DEBUG
    keeps the traceback."""
    from kernelgraph.nodes.brain import BuiltinBrain
    from kernelgraph.nodes.llm import CannotWrite

    def broken():
        raise RuntimeError("view size is not compatible")

    brain = BuiltinBrain.__new__(BuiltinBrain)  # _ask needs no store
    monkeypatch.delenv("KERNELGRAPH_DEBUG", raising=False)
    with pytest.raises(CannotWrite) as info:
        brain._ask(broken)
    message = str(info.value)
    assert "RuntimeError: view size is not compatible" in message and "kernelgraph bug" in message
    assert "--model" in message and info.value.stop_reason == "builtin_unsupported"
    monkeypatch.setenv("KERNELGRAPH_DEBUG", "1")
    with pytest.raises(RuntimeError):
        brain._ask(broken)
