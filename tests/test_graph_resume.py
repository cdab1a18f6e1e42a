"""Crash, resume, branch and human review of agent runs, across processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import TASK, Agent, kernel, write_script
from cli_helpers import ROOT, json_line
from proc_helpers import wait_until_gone


def isolated_agent(tmp_path: Path, analysed_cache: Path) -> tuple[Agent, Path]:
    """An agent with its own caches (nothing evaluated before; the task's analysis is copied
    in) and harness work directory."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(analysed_cache, tmp_path / "cache")
    env = {"KERNELGRAPH_CACHE_DIR": str(tmp_path / "cache"), "KERNELGRAPH_WORK_DIR": str(work)}
    return Agent(tmp_path, env=env), work


def start_and_signal(agent: Agent, script: Path, signum: int, at_verification: int):
    """Start `kernelgraph run` and send `signum` while candidate `at_verification` is being
    verified (its harness workers are running then)."""
    args = ["run", str(TASK), "--dsl", "cpp", "--device", "cpu", "--seeds", "1"]
    args += ["--model", f"script:{script}", "--max-iterations", "3", "--sol-target-pct", "1e9"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelgraph.graph.cli", *args, "--json"],
        cwd=agent.folder,
        env={**os.environ, "PYTHONPATH": str(ROOT), **agent.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    verifying = 0
    for line in proc.stderr:
        if "verifying" in line:
            verifying += 1
            if verifying == at_verification:
                proc.send_signal(signum)
                break
    stdout, _ = proc.communicate(timeout=120)
    return proc.returncode, stdout


THREE = [kernel("cpp_scale_sub"), kernel("cpp_scale_add"), kernel("cpp_scale_add_omp")]


@pytest.mark.slow
def test_sigkill_then_resume_loses_nothing_and_evaluates_nothing_twice(
    tmp_path: Path, analysed_cache: Path
) -> None:
    agent, work = isolated_agent(tmp_path, analysed_cache)
    code, _ = start_and_signal(agent, write_script(tmp_path, THREE), signal.SIGKILL, 2)
    assert code == -signal.SIGKILL
    assert wait_until_gone(work) == [], "candidate processes outlived kernelgraph"

    run_id = agent.query("SELECT id FROM runs")[0][0]
    listed = json_line(agent("runs", "--json"))
    assert listed[0]["status"] == "interrupted"  # its process is gone
    done = agent("resume", run_id, "--json")
    summary = json_line(done)
    assert done.returncode == 0, done.stderr
    assert summary["status"] == "verified"
    real = agent.query(
        "SELECT cache_key, count(*) FROM evaluations "
        "WHERE json_extract(verdict, '$.cached') = 0 GROUP BY cache_key"
    )
    assert real and all(count == 1 for _, count in real), real
    assert agent.statuses(run_id)[0] == "incorrect"  # the first verdict survived the kill
    assert wait_until_gone(work) == []
    assert [p.name for p in work.iterdir()] == []  # the killed run's folders were swept too


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path: Path, analysed_cache: Path) -> None:
    agent, work = isolated_agent(tmp_path, analysed_cache)
    code, stdout = start_and_signal(agent, write_script(tmp_path, THREE), signal.SIGINT, 1)
    summary = json.loads(stdout.splitlines()[-1])
    assert code == 3
    assert (summary["status"], summary["stop_reason"]) == ("interrupted", "interrupted")
    assert f"kernelgraph resume {summary['run_id']}" in summary["message"]
    assert wait_until_gone(work) == []
    done = agent("resume", summary["run_id"], "--json")
    assert done.returncode == 0, done.stderr
    assert json_line(done)["status"] == "verified"


def test_branch_from_a_mid_run_checkpoint(tmp_path: Path) -> None:
    agent = Agent(tmp_path)
    add, omp = kernel("cpp_scale_add"), kernel("cpp_scale_add_omp")
    reworked = tmp_path / "reworked.py"  # after the rejection, a kernel not written before
    reworked.write_text(
        Path(add["file"]).read_text().replace("x[i] * 2.0f + 1.0f", "2.0f * x[i] + 1.0f")
    )
    script = write_script(tmp_path, [add, omp, {"file": str(reworked)}])
    first = json_line(agent.run(script, "--max-iterations", "2"))
    rows = json_line(agent("history", first["run_id"], "--json"))
    after_profile = next(r for r in rows if r["node"] == "profiler")
    assert after_profile["next"] == "coder" and after_profile["best_candidate"]

    proc = agent(
        "branch", first["run_id"], "--from", str(after_profile["step"]),
        "--config", "max_iterations=3", "--json",
    )  # fmt: skip
    branch = json_line(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert branch["run_id"] != first["run_id"]
    assert branch["stop_reason"] == "max_iterations"
    assert branch["spend"]["llm_calls"] == 2  # its own two coder calls: budgets count anew
    baseline = json_line(agent("show", first["run_id"], "--json"))["baseline"]
    assert baseline and baseline["eager_ms"] > 0
    assert json_line(agent("show", branch["run_id"], "--json"))["baseline"] == baseline
    runs = json_line(agent("runs", "--json"))
    assert runs[0]["run_id"] == branch["run_id"]  # newest first
    assert runs[0]["parent_run_id"] == first["run_id"]
    unknown = agent("branch", first["run_id"], "--from", "999", "--json")
    assert unknown.returncode == 2


def test_approve_reject_and_edit_across_processes(tmp_path: Path) -> None:
    agent = Agent(tmp_path)
    add, omp = kernel("cpp_scale_add"), kernel("cpp_scale_add_omp")
    reworked = tmp_path / "reworked.py"  # after the rejection, a kernel not written before
    reworked.write_text(
        Path(add["file"]).read_text().replace("x[i] * 2.0f + 1.0f", "2.0f * x[i] + 1.0f")
    )
    script = write_script(tmp_path, [add, omp, {"file": str(reworked)}])
    waiting = agent.run(script, "--approve", "--max-iterations", "3")
    summary = json_line(waiting)
    assert waiting.returncode == 3
    assert summary["status"] == "awaiting_approval"
    run_id = summary["run_id"]
    assert "correctness" in waiting.stderr  # the reviewer is shown the check matrix

    shown = agent("show", run_id)
    assert "awaiting approval" in shown.stdout and "class ModelNew" in shown.stdout
    assert "correctness" in shown.stdout  # the check matrix
    assert "planner: 1 LLM calls" in shown.stdout  # spend per node

    approved = agent("approve", run_id, "--json")  # profiled, refined, next one waits
    assert approved.returncode == 3, approved.stderr
    rejected = agent("reject", run_id, "--feedback", "use a plain loop", "--json")
    assert rejected.returncode == 3, rejected.stderr
    feedback = agent.query("SELECT count(*) FROM blobs WHERE content = 'use a plain loop'")
    assert feedback[0][0] == 1
    edited = agent("edit", run_id, "--kernel", str(tmp_path / "mine.py"), "--json")
    assert edited.returncode == 2  # no such file: a clear error, the run still waits
    mine = tmp_path / "mine.py"
    mine.write_text(Path(kernel("cpp_scale_add_omp")["file"]).read_text())
    edited = agent("edit", run_id, "--kernel", str(mine), "--json")
    final = json_line(edited)
    assert edited.returncode == 0, edited.stderr
    assert final["status"] == "verified"
    labels = [r[0] for r in agent.query("SELECT label FROM candidates ORDER BY created_at")]
    assert "human edit" in labels
    assert agent("approve", run_id, "--json").returncode == 2  # nothing waits any more
