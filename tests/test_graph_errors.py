"""Bad input to the agent commands: one readable message, the right exit code, no lost run."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path

import pytest
from agent_helpers import CASES, TASK, Agent, kernel, summary_of, write_script
from cli_helpers import assert_readable_error, json_line

BROKEN_TASK = CASES / "tasks" / "bad_reference_raises.py"


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    return Agent(tmp_path, env={"KERNELGRAPH_MODEL": "", "KERNELGRAPH_BASE_URL": ""})


def error_of(proc) -> dict:
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--dsl", "fortran"], "unknown DSL 'fortran'"),
        (["--dsl", "cuda", "--device", "cpu"], "runs on cuda, not on cpu"),
        (["--dsl", "cpp", "--precision", "fp8"], "--precision must be one of"),
        (["--dsl", "cpp", "--max-iterations", "0"], "max_iterations"),
    ],
)
def test_bad_settings_are_refused_before_a_run_exists(agent: Agent, args, fragment) -> None:
    proc = agent("run", str(TASK), "--model", "script:none.json", *args, "--json")
    assert proc.returncode == 2
    assert_readable_error(proc, fragment)
    assert fragment in error_of(proc)["error"]
    assert not agent.db.exists() or agent.query("SELECT count(*) FROM runs")[0][0] == 0


def test_missing_task(agent: Agent, tmp_path: Path) -> None:
    proc = agent("run", str(tmp_path / "nope.py"), "--dsl", "cpp", "--model", "x", "--json")
    assert proc.returncode == 2
    assert error_of(proc)["kind"] == "invalid_task"


def test_no_model_runs_the_builtin(agent: Agent) -> None:
    proc = agent("run", str(TASK), "--dsl", "cpp", "--device", "cpu", "--seeds", "1", "--json")
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    summary = summary_of(proc)
    assert summary["status"] == "verified" and summary["spend"]["llm_calls"] == 0
    assert "Traceback" not in proc.stderr


def test_a_key_alone_never_selects_an_endpoint(agent: Agent) -> None:
    proc = agent(
        "run", str(TASK), "--dsl", "cpp", "--device", "cpu", "--seeds", "1", "--json",
        env={"OPENAI_API_KEY": "sk-should-not-be-used", "OPENAI_BASE_URL": "http://127.0.0.1:9"},
    )  # fmt: skip
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary_of(proc)["spend"] == {
        "llm_calls": 0,
        "tokens_in": 0,
        "tokens_out": 0,
        "usd": 0.0,
    }
    assert agent.query("SELECT count(*) FROM llm_calls")[0][0] == 0


def test_a_broken_task_ends_the_run_as_a_task_error(agent: Agent, tmp_path: Path) -> None:
    proc = agent.run(write_script(tmp_path, [kernel("cpp_scale_add")]), task=BROKEN_TASK)
    summary = summary_of(proc)
    assert proc.returncode == 2, proc.stderr
    assert (summary["status"], summary["stop_reason"]) == ("task_error", "task_error")
    message = summary["message"]
    assert "raises in Model.forward" in message and "fix the task file" in message
    assert "kernelgraph resume" not in message and ".." not in message
    assert "Traceback" not in proc.stderr

    run_id = summary["run_id"]
    assert json_line(agent("runs", "--json"))[0]["status"] == "task_error"
    shown = agent("show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json_line(shown)["run"]["status"] == "task_error"
    assert "task_error" in agent("show", run_id).stdout
    again = agent("resume", run_id, "--json")
    assert again.returncode == 2
    assert "task error" in error_of(again)["error"]


def test_run_harness_options_are_kept_with_the_run(agent: Agent, tmp_path: Path) -> None:
    script = write_script(tmp_path, [kernel("cpp_scale_add")])
    options = ["--max-host-memory", "4", "--share-weights", "--no-cache"]
    run_id = summary_of(agent.run(script, *options, task=BROKEN_TASK))["run_id"]
    stored = agent.query(
        "SELECT json_extract(config, '$.max_host_gb'), json_extract(config, '$.share_weights'), "
        "json_extract(config, '$.no_cache') FROM runs WHERE id = ?",
        run_id,
    )
    assert stored == [(4.0, 1, 1)]


def test_bad_script_file(agent: Agent, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = agent.run(bad)
    assert proc.returncode == 2
    assert "bad.json" in error_of(proc)["error"]


def test_resume_unknown_finished_and_running_runs(agent: Agent, tmp_path: Path) -> None:
    proc = agent("resume", "r-nope", "--json")
    assert proc.returncode == 2
    assert "no run 'r-nope'" in error_of(proc)["error"]

    script = write_script(tmp_path, [kernel("cpp_scale_add")])
    done = agent.run(script, "--max-iterations", "1")
    run_id = json.loads(done.stdout.splitlines()[-1])["run_id"]
    finished = agent("resume", run_id, "--json")
    assert finished.returncode == 2 and "is finished" in error_of(finished)["error"]

    # pretend a live process (this test) holds the run: a second worker is refused
    agent.query(
        "UPDATE runs SET status = 'running', lock_pid = ?, lock_host = ?, lock_started = NULL "
        "WHERE id = ?",
        os.getpid(),
        socket.gethostname(),
        run_id,
    )
    locked = agent("resume", run_id, "--json")
    assert locked.returncode == 2
    assert "already running" in error_of(locked)["error"]


def test_a_dead_lock_holder_is_taken_over(agent: Agent, tmp_path: Path) -> None:
    script = write_script(tmp_path, [kernel("cpp_scale_add"), kernel("cpp_scale_add_omp")])
    first = json.loads(agent.run(script, "--max-iterations", "1").stdout.splitlines()[-1])
    run_id = first["run_id"]
    agent.query(
        "UPDATE runs SET status = 'interrupted', lock_pid = 999999999, lock_host = ? WHERE id = ?",
        socket.gethostname(),
        run_id,
    )
    proc = agent("resume", run_id, "--json")
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"


def test_corrupt_database(agent: Agent) -> None:
    agent.db.write_bytes(b"this is not a database" * 100)
    proc = agent("runs", "--json")
    assert proc.returncode == 2
    assert "database" in error_of(proc)["error"]
    assert "Traceback" not in proc.stderr


def test_locked_database(agent: Agent) -> None:
    assert agent("runs", "--json").returncode == 0  # creates the store
    holder = sqlite3.connect(agent.db)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        proc = agent("runs", "--json", env={"KERNELGRAPH_DB_TIMEOUT_S": "0.5"})
    finally:
        holder.rollback()
        holder.close()
    assert proc.returncode == 3  # the machine's fault: trying again may work
    error = error_of(proc)
    assert error["kind"] == "database_busy" and "locked for the whole 0.5 s" in error["error"]
    assert "KERNELGRAPH_DB_TIMEOUT_S" in error["error"]
    assert "Traceback" not in proc.stderr
