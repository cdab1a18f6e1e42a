"""How errors end a run: a task error is final (exit 2), a harness error is a resumable stop
(exit 3); one full stop between what went wrong and what to do."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from agent_helpers import TASK, kernel, write_script

from kernelgraph.graph import runner
from kernelgraph.graph.error_stops import error_stop
from kernelgraph.graph.summary import sentences
from kernelgraph.nodes.llm.errors import EndpointDown
from kernelgraph.state.config import ModelConfig, RunConfig
from kernelgraph.state.store import open_store
from kernelgraph.tools.harness.stopping import STOPPING
from kernelgraph.tools.harness.verdict import HarnessError, TaskError, UsageError

RUN = "r-20261124-ab12"


@pytest.mark.parametrize(
    ("error", "status", "reason", "code", "resumable"),
    [
        (TaskError("the reference raises in Model.forward."), "task_error", "task_error", 2, False),
        (HarnessError("a worker was killed (SIGKILL)."), "interrupted", "harness_error", 3, True),
        (KeyboardInterrupt(), "interrupted", "interrupted", 3, True),
        (UsageError("--set expects NAME=VALUE."), "interrupted", "usage_error", 2, True),
        (EndpointDown("the endpoint is down."), "interrupted", "endpoint_down", 3, True),
    ],
)
def test_each_error_gets_its_status_exit_code_and_advice(
    error, status, reason, code, resumable
) -> None:
    stop = error_stop(error, RUN)
    assert (stop.status, stop.reason, stop.exit_code) == (status, reason, code)
    assert (f"kernelgraph resume {RUN}" in stop.message) is resumable
    assert ".." not in stop.message
    if str(error):
        assert str(error).rstrip(".") in stop.message  # the cause is named


def test_a_task_error_says_what_to_fix() -> None:
    message = error_stop(TaskError("Model.forward raises"), RUN).message
    assert message.startswith("the task cannot be used: Model.forward raises. ")
    assert "fix the task file" in message and "--set" in message and "new run" in message


@pytest.mark.parametrize(
    ("parts", "joined"),
    [
        (("it broke.", "Continue with: x"), "it broke. Continue with: x"),
        (("it broke", "Continue with: x"), "it broke. Continue with: x"),
        (("why?", "fix it"), "why? fix it"),
        (("  only  ",), "only"),
        (("", "advice"), "advice"),
    ],
)
def test_sentences_put_one_full_stop_between_parts(parts, joined) -> None:
    assert sentences(*parts) == joined


def test_a_harness_error_stops_the_run_resumably(tmp_path: Path, monkeypatch) -> None:
    import kernelgraph.nodes.checks as checks

    def machine_failure(*args, **kwargs):
        raise HarnessError("the judge worker was killed from outside (the OOM killer?)")

    real_evaluate = checks.evaluate
    monkeypatch.setattr(checks, "evaluate", machine_failure)
    script = write_script(tmp_path, [kernel("cpp_scale_add")])
    config = RunConfig(
        task_path=str(TASK), dsl="cpp", device="cpu", seeds=1,
        model=ModelConfig(name=f"script:{script}"),
    ).with_changes({"max_iterations": 1, "sol_target_pct": 1e9})  # fmt: skip
    db = tmp_path / "runs.db"

    stopped = runner.start(config, db)
    assert (stopped.status, stopped.stop_reason, stopped.code()) == (
        "interrupted",
        "harness_error",
        3,
    )
    assert "killed from outside" in stopped.message
    assert f"kernelgraph resume {stopped.run_id}" in stopped.message
    assert ".." not in stopped.message
    assert open_store(db).get_run(stopped.run_id)["status"] == "interrupted"

    monkeypatch.setattr(checks, "evaluate", real_evaluate)  # the machine is back
    resumed = runner.resume(stopped.run_id, db)
    assert resumed.status == "verified", resumed.message


@pytest.mark.parametrize(
    "precision, device, op, failure, hinted",
    [
        ("fp32", "cuda", "aten.convolution", "c-1: incorrect: incorrect: seed 42: ...", True),
        ("ieee", "cuda", "aten.convolution", "c-1: incorrect: incorrect: seed 42: ...", False),
        ("fp32", "cpu", "aten.convolution", "c-1: incorrect: incorrect: seed 42: ...", False),
        ("fp32", "cuda", "aten.addmm", "c-1: incorrect: incorrect: seed 42: ...", False),
        ("fp32", "cuda", "aten.convolution", "c-1: compile_error: bad syntax", False),
    ],
)
def test_a_convolution_that_misses_a_tf32_reference_says_why_and_what_to_do(
    precision, device, op, failure, hinted
):
    """Under fp32 on a GPU, cuDNN may compute the reference's convolution in TF32: a run whose
    candidates were all incorrect on a task with a convolution says so, and names the ways out."""
    from types import SimpleNamespace

    from kernelgraph.state.graph_state import GraphState

    config = RunConfig(task_path=str(TASK), dsl="triton", device=device, precision=precision)
    ctx = SimpleNamespace(config=config, get_json=lambda sha: {"ops": [{"op": op}]})
    state = GraphState(analysis_sha="a", recent_failures=[failure])
    hint = runner._tf32_hint(ctx, state)
    assert bool(hint) == hinted
    if hinted:
        assert "--policy hybrid" in hint and "--precision ieee" in hint


class _SignalsInItsFinalizer:
    """Sends Ctrl-C to this process from `__del__`: Python raises the KeyboardInterrupt inside
    the finalizer, prints "Exception ignored" and drops it, as it may at any moment of a run."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the lost one
def test_a_ctrl_c_whose_interrupt_is_lost_in_a_finalizer_still_stops_the_run(
    tmp_path: Path, monkeypatch
) -> None:
    import kernelgraph.nodes.checks as checks

    real_evaluate = checks.evaluate

    def evaluate_then_signal(*args, **kwargs):
        verdict = real_evaluate(*args, **kwargs)
        _SignalsInItsFinalizer()  # collected at once: the signal arrives in its finalizer
        return verdict

    monkeypatch.setattr(checks, "evaluate", evaluate_then_signal)
    script = write_script(tmp_path, [kernel("cpp_scale_add")])
    config = RunConfig(
        task_path=str(TASK), dsl="cpp", device="cpu", seeds=1,
        model=ModelConfig(name=f"script:{script}"),
    ).with_changes({"max_iterations": 1, "sol_target_pct": 1e9})  # fmt: skip

    try:
        stopped = runner.start(config, tmp_path / "runs.db")
    finally:
        STOPPING.clear()  # the mark outlives the run (a search's lanes may): not into later tests
    assert (stopped.status, stopped.stop_reason, stopped.code()) == (
        "interrupted",
        "interrupted",
        3,
    )
    assert f"kernelgraph resume {stopped.run_id}" in stopped.message
