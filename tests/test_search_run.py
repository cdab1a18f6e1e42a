"""Parallel search runs (--width, --islands) through the real command line, with scripted
lanes: fan-out and fan-in, migration, deduplication across lanes, budgets, a SIGKILL in the
middle of a round, and a branch from a round's checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import PLAN, SKETCH, TASK, Agent, kernel
from cli_helpers import ROOT, json_line
from proc_helpers import wait_until_gone

ADD, OMP = kernel("cpp_scale_add"), kernel("cpp_scale_add_omp")
WRONG, BROKEN = kernel("cpp_scale_sub"), kernel("cpp_syntax_error")


@pytest.fixture
def agent(tmp_path: Path, analysed_cache: Path) -> Agent:
    """An agent with caches of its own (nothing evaluated before; the task's analysis is
    copied in) and its own harness work directory."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(analysed_cache, tmp_path / "cache")
    env = {"KERNELGRAPH_CACHE_DIR": str(tmp_path / "cache"), "KERNELGRAPH_WORK_DIR": str(work)}
    return Agent(tmp_path, env=env)


def variant(folder: Path, name: str, expression: str) -> dict:
    """Another correct scale-add kernel: the same file computing y by `expression`."""
    path = folder / f"{name}.py"
    path.write_text(Path(ADD["file"]).read_text().replace("x[i] * 2.0f + 1.0f", expression))
    return {"file": str(path)}


def lane_script(folder: Path, lanes: dict[int, list], shared: list | None = None) -> Path:
    """A script whose lane i's coder answers from lanes[i] (and the rest from `shared`)."""
    script = {"planner": [{"json": PLAN}], "sketch_writer": [{"json": SKETCH}]}
    script |= {f"coder#{lane}": replies for lane, replies in lanes.items()}
    if shared is not None:
        script["coder"] = shared
    path = folder / "script.json"
    path.write_text(json.dumps(script))
    return path


def start_search(agent: Agent, script: Path, *extra: str) -> subprocess.Popen:
    """`kernelgraph run --width 2` in the background, its progress readable line by line."""
    args = ["run", str(TASK), "--dsl", "cpp", "--device", "cpu", "--seeds", "1", "--json"]
    args += ["--model", f"script:{script}", "--width", "2", "--sol-target-pct", "1e9", *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "kernelgraph.graph.cli", *args],
        cwd=agent.folder,
        env={**os.environ, "PYTHONPATH": str(ROOT), **agent.env},
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def labels(agent: Agent, run_id: str) -> list[str]:
    rows = agent.query("SELECT label FROM candidates WHERE run_id = ? ORDER BY label", run_id)
    return [row[0] for row in rows]


def evaluated_once(agent: Agent) -> None:
    """No kernel was evaluated twice: one uncached evaluation per cache key."""
    real = agent.query(
        "SELECT cache_key, count(*) FROM evaluations "
        "WHERE json_extract(verdict, '$.cached') = 0 GROUP BY cache_key"
    )
    assert real and all(count == 1 for _, count in real), real


def test_a_round_fans_out_to_its_lanes_and_gathers_their_kernels(agent, tmp_path) -> None:
    fast = variant(tmp_path, "fast", "2.0f * x[i] + 1.0f")
    script = lane_script(tmp_path, {0: [ADD], 1: [OMP], 2: [WRONG, fast]})
    proc = agent.run(script, "--width", "3", "--max-iterations", "4")
    summary = json_line(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    run_id = summary["run_id"]
    assert summary["stop_reason"] == "max_iterations"
    assert labels(agent, run_id) == [
        "r1 i0 l0: write #1 (rewrite)",
        "r1 i0 l1: write #2 (rewrite)",
        "r1 i0 l2: retry #4 (rewrite)",  # lane 2's wrong kernel was retried in its own branch
        "r1 i0 l2: write #3 (rewrite)",
    ]
    assert agent.llm_calls(run_id) == {"planner": 1, "sketch_writer": 1, "coder": 4}
    shown = json_line(agent("show", run_id, "--json"))
    search = shown["search"]
    assert search["round"] == 1
    assert len(search["islands"][0]["members"]) == 3  # the three verified kernels
    assert search["islands"][0]["written"] == 4 and search["islands"][0]["failed_lanes"] == 0
    assert shown["is_best"] and shown["candidate"]["id"] == search["islands"][0]["best"]
    rows = json_line(agent("history", run_id, "--json"))
    assert [r["node"] for r in rows[-3:]] == ["islands", "branch", "gather"]
    assert rows[-1]["round"] == 1 and rows[-1]["archive"] >= 1
    evaluated_once(agent)


def test_islands_trade_their_best_and_lanes_get_an_inspiration(agent, tmp_path) -> None:
    fast, faster = (
        variant(tmp_path, "v1", "2.0f * x[i] + 1.0f"),
        variant(tmp_path, "v2", "x[i] + x[i] + 1.0f"),
    )
    script = lane_script(tmp_path, {0: [ADD, fast], 1: [OMP, faster]})
    proc = agent.run(
        script, "--width", "2", "--islands", "2", "--migrate-every", "1",
        "--max-iterations", "4", "--record",
    )  # fmt: skip
    summary = json_line(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    search = json_line(agent("show", summary["run_id"], "--json"))["search"]
    assert search["round"] == 2 and search["migrations"] >= 2
    island_of = dict(agent.query("SELECT id, substr(label, 5, 1) FROM candidates"))
    for island in search["islands"]:  # each holds its own kernels and the other's best
        owners = [int(island_of[m]) for m in island["members"]]
        assert island["island"] in owners and 1 - island["island"] in owners
    prompts = agent.query(
        "SELECT b.content FROM llm_calls l JOIN blobs b ON b.sha256 = l.prompt_blob "
        "WHERE l.run_id = ? AND l.node = 'coder'",
        summary["run_id"],
    )
    inspired = [p for (p,) in prompts if "Inspiration: the best kernel of another island" in p]
    assert len(inspired) == 2, proc.stderr  # round 2's lanes, each shown the other's best
    assert all("- kernel time:" in p and "No profile was kept" not in p for p in inspired)
    sketches = agent.query(
        "SELECT count(*) FROM llm_calls WHERE run_id = ? AND node = 'sketch_writer'",
        summary["run_id"],
    )
    assert sketches == [(2,)]  # one sketch per island


def test_lanes_writing_the_same_kernel_evaluate_it_once(agent, tmp_path) -> None:
    script = lane_script(tmp_path, {}, shared=[ADD, OMP])  # every lane answers ADD, then OMP
    proc = agent.run(script, "--width", "2", "--max-iterations", "4", "--max-retries", "1")
    summary = json_line(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary["stop_reason"] == "max_iterations"  # four written: two kernels and two twins
    assert proc.stderr.count("duplicate: the same kernel as candidate") == 2
    checked = agent.query("SELECT count(DISTINCT candidate_id) FROM evaluations")
    assert checked == [(2,)]
    evaluated_once(agent)


def test_calls_under_way_count_against_the_llm_budget(agent, tmp_path) -> None:
    script = lane_script(tmp_path, {0: [ADD], 1: [OMP], 2: [WRONG]})
    proc = agent.run(script, "--width", "3", "--max-llm-calls", "4")
    summary = json_line(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary["stop_reason"] == "max_llm_calls"
    assert summary["status"] == "verified", proc.stderr
    assert summary["spend"]["llm_calls"] == 4  # planner, sketch and two of the three lanes


def test_a_budget_reached_mid_round_lets_written_kernels_finish(agent, tmp_path) -> None:
    script = lane_script(tmp_path, {0: [ADD], 1: [WRONG, OMP]})
    proc = agent.run(script, "--width", "2", "--max-llm-calls", "4")
    summary = json_line(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary["stop_reason"] == "max_llm_calls"
    assert summary["spend"]["llm_calls"] == 4  # lane 1's retry was never asked for
    assert sorted(agent.statuses(summary["run_id"])) == ["incorrect", "passed", "passed"]


@pytest.mark.slow
def test_sigkill_mid_round_then_resume_evaluates_no_finished_lane_again(agent, tmp_path) -> None:
    script = lane_script(tmp_path, {0: [ADD], 1: [WRONG, BROKEN, OMP]})
    proc = start_search(agent, script, "--max-iterations", "4")
    for line in proc.stderr:  # lane 0 profiled its kernel; lane 1 is still at work
        if "[r1 i0 l0]" in line and "vs eager" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert wait_until_gone(agent.folder / "work") == []
    run_id = agent.query("SELECT id FROM runs")[0][0]
    assert not agent.query("SELECT 1 FROM candidates WHERE label LIKE 'r1 i0 l1: write%' AND id IN "
                           "(SELECT candidate_id FROM evaluations WHERE kernel_ms IS NOT NULL)")  # fmt: skip

    done = agent("resume", run_id, "--json")
    summary = json_line(done)
    assert done.returncode == 0, done.stderr
    assert summary["status"] == "verified"
    evaluated_once(agent)
    assert agent.llm_calls(run_id)["coder"] == 4  # lane 0 was not asked again
    search = json_line(agent("show", run_id, "--json"))["search"]
    assert search["round"] == 1 and len(search["islands"][0]["members"]) == 2


def test_branch_from_a_rounds_checkpoint_runs_the_next_round(agent, tmp_path) -> None:
    fast, other = (
        variant(tmp_path, "v1", "2.0f * x[i] + 1.0f"),
        variant(tmp_path, "v2", "x[i] + x[i] + 1.0f"),
    )
    script = lane_script(tmp_path, {0: [ADD, fast], 1: [OMP, other]})
    first = json_line(agent.run(script, "--width", "2", "--max-iterations", "2"))
    rows = json_line(agent("history", first["run_id"], "--json"))
    after_round = next(r for r in rows if r["node"] == "gather")
    assert after_round["round"] == 1
    proc = agent(
        "branch", first["run_id"], "--from", str(after_round["step"]),
        "--config", "max_iterations=4", "--json",
    )  # fmt: skip
    branched = json_line(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert branched["stop_reason"] == "max_iterations"
    assert json_line(agent("show", branched["run_id"], "--json"))["search"]["round"] == 2
    refused = agent("branch", first["run_id"], "--from", "2", "--config", "width=1", "--json")
    assert refused.returncode != 0 and "keeps its graph" in refused.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--width", "2", "--approve"), "--approve reviews one candidate at a time"),
        (("--islands", "3", "--width", "2"), "--islands 3 needs at least one lane each"),
        (("--width", "0"), "Invalid value for '--width'"),
    ],
)
def test_search_settings_that_cannot_work_are_refused(agent, tmp_path, options, message) -> None:
    proc = agent.run(lane_script(tmp_path, {0: [ADD]}), *options)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not agent.db.exists()  # refused before any run was made


@pytest.mark.slow
def test_ctrl_c_mid_round_leaves_no_false_verdict_and_resume_finishes(agent, tmp_path) -> None:
    script = lane_script(tmp_path, {0: [ADD], 1: [OMP]})
    proc = start_search(agent, script, "--max-iterations", "2")
    for line in proc.stderr:
        if "verifying" in line:  # a lane's harness workers are running
            proc.send_signal(signal.SIGINT)
            break
    stdout, _ = proc.communicate(timeout=120)
    stopped = json.loads(stdout.strip().splitlines()[-1])
    assert proc.returncode == 3 and stopped["status"] == "interrupted"
    # the lanes' workers were killed: what was recorded finished before (no crash from a kill)
    assert set(agent.statuses(stopped["run_id"])) <= {"passed"}
    assert wait_until_gone(agent.folder / "work") == []
    done = agent("resume", stopped["run_id"], "--json")
    assert done.returncode == 0, done.stderr
    assert json_line(done)["status"] == "verified"
    assert agent.llm_calls(stopped["run_id"])["coder"] == 2  # the lanes were not asked again
    evaluated_once(agent)
