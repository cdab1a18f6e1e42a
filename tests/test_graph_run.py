"""End-to-end runs of the agent graph with a scripted model, through the real command line,
on the CPU with C++ kernels: retry, repair, refine, escalation, bad replies and budgets."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from agent_helpers import Agent, kernel, summary_of, write_script
from cli_helpers import ROOT, json_line, kernelgraph


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    return Agent(tmp_path)


def history_nodes(agent: Agent, run_id: str) -> list[str]:
    proc = agent("history", run_id, "--json")
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    return [row["node"] for row in json_line(proc)]


def test_compile_error_goes_back_to_the_coder(agent: Agent, tmp_path: Path) -> None:
    script = write_script(tmp_path, [kernel("cpp_syntax_error"), kernel("cpp_scale_add")])
    proc = agent.run(script, "--max-iterations", "2")
    summary = summary_of(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary["status"] == "verified"
    assert summary["stop_reason"] == "max_iterations"
    nodes = history_nodes(agent, summary["run_id"])
    assert nodes[nodes.index("compiler") + 1] == "coder"  # the failed compile went back
    assert agent.statuses(summary["run_id"]) == ["passed", "passed"]  # verify, profile
    best = Path(summary["best"]["path"]).read_text()
    assert "y[i] = x[i] * 2.0f + 1.0f;" in best


def test_wrong_result_is_repaired(agent: Agent, tmp_path: Path) -> None:
    script = write_script(tmp_path, [kernel("cpp_scale_sub"), kernel("cpp_scale_add")])
    proc = agent.run(script, "--max-iterations", "2")
    summary = summary_of(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert agent.statuses(summary["run_id"]) == ["incorrect", "passed", "passed"]
    assert summary["best"]["speedup_vs_eager"] is not None
    # the repair was written from the failing candidate, which is its parent
    rows = agent.query("SELECT id, parent_id FROM candidates ORDER BY created_at")
    assert rows[1][1] == rows[0][0]


def test_pass_then_refine_then_plateau(agent: Agent, tmp_path: Path) -> None:
    script = write_script(tmp_path, [kernel("cpp_scale_add"), kernel("cpp_scale_add_omp")])
    proc = agent.run(
        script, "--max-iterations", "5", "--plateau-patience", "1", "--min-gain-pct", "99"
    )
    summary = summary_of(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary["stop_reason"] == "plateau"
    labels = [r[0] for r in agent.query("SELECT label FROM candidates ORDER BY created_at")]
    assert labels[0].startswith("write") and labels[1].startswith("refine")
    assert agent.llm_calls(summary["run_id"]) == {"planner": 1, "sketch_writer": 1, "coder": 2}
    # both candidates were profiled; speedups divide the first one's eager time
    eager = agent.query(
        "SELECT e.eager_ms FROM evaluations e JOIN candidates c ON e.candidate_id = c.id "
        "WHERE c.run_id = ? AND e.kernel_ms IS NOT NULL ORDER BY e.created_at, e.id",
        summary["run_id"],
    )
    assert len(eager) == 2
    shown = json_line(agent("show", summary["run_id"], "--json"))
    assert shown["baseline"]["eager_ms"] == eager[0][0]
    best_ms = shown["verdict"]["timing"]["kernel_ms"]
    assert summary["best"]["speedup_vs_eager"] == pytest.approx(eager[0][0] / best_ms)


def test_no_cache_evaluates_again_what_an_earlier_run_cached(agent: Agent, tmp_path) -> None:
    script = write_script(tmp_path, [kernel("cpp_scale_add")])

    def cached_flags(*options: str) -> list[int]:
        """Whether each evaluation of a new run (verify, profile) was served from a cache."""
        proc = agent.run(script, "--max-iterations", "1", *options)
        assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
        run_id = summary_of(proc)["run_id"]
        rows = agent.query(
            "SELECT json_extract(e.verdict, '$.cached') FROM evaluations e "
            "JOIN candidates c ON e.candidate_id = c.id WHERE c.run_id = ? "
            "ORDER BY e.created_at, e.id",
            run_id,
        )
        return [cached for (cached,) in rows]

    cached_flags()  # evaluates and caches
    assert cached_flags() == [1, 1]  # an identical run reads both verdicts back
    assert cached_flags("--no-cache") == [0, 0]


def test_repeated_failure_escalates_to_a_new_sketch(agent: Agent, tmp_path: Path) -> None:
    wrong = kernel("cpp_scale_sub")
    script = write_script(tmp_path, [wrong, wrong, kernel("cpp_scale_add")], sketches=2)
    proc = agent.run(script, "--max-retries", "2", "--max-iterations", "3")
    summary = summary_of(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert agent.llm_calls(summary["run_id"])["sketch_writer"] == 2
    nodes = history_nodes(agent, summary["run_id"])
    assert nodes.count("sketch_writer") == 2


def test_failing_without_end_gives_no_verified_kernel(agent: Agent, tmp_path: Path) -> None:
    wrong = kernel("cpp_scale_sub")
    script = write_script(tmp_path, [wrong, wrong], sketches=2)
    proc = agent.run(script, "--max-retries", "1", "--max-escalations", "1")
    summary = summary_of(proc)
    assert proc.returncode == 1
    assert summary["status"] == "no_verified_kernel"
    assert summary["stop_reason"] == "retries_exhausted"
    assert summary["best"] is None
    assert "incorrect" in summary["message"]


def test_bad_and_truncated_replies_are_asked_again(agent: Agent, tmp_path: Path) -> None:
    replies = [
        {"truncated": "```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    def f"},
        "I would write a fast kernel here.",
        kernel("cpp_scale_add"),
    ]
    script = write_script(tmp_path, replies)
    proc = agent.run(script, "--max-iterations", "1")
    summary = summary_of(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary["spend"]["llm_calls"] == 5  # planner, sketch, three coder replies
    statuses = agent.query(
        "SELECT status FROM llm_calls WHERE node = 'coder' ORDER BY created_at, id"
    )
    assert [s[0] for s in statuses] == ["bad_reply", "bad_reply", "ok"]


def test_llm_call_budget_stops_and_keeps_the_best(agent: Agent, tmp_path: Path) -> None:
    script = write_script(tmp_path, [kernel("cpp_scale_add"), kernel("cpp_scale_add_omp")])
    proc = agent.run(script, "--max-llm-calls", "3")
    summary = summary_of(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary["stop_reason"] == "max_llm_calls"
    assert summary["spend"]["llm_calls"] == 3
    assert summary["best"] is not None
    # a finished run cannot be resumed; the message says how to go on
    again = agent("resume", summary["run_id"], "--json")
    assert again.returncode == 2
    assert "branch" in json.loads(again.stdout.splitlines()[-1])["error"]


def test_the_readme_main_command_ends_verified(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"```bash\n(.*?)\n```", readme, re.S).group(1)
    args = shlex.split(command.split(".venv/bin/kernelgraph ", 1)[1]) + ["--json"]
    proc = kernelgraph(*args, cwd=ROOT, env={"KERNELGRAPH_DB": str(tmp_path / "runs.db")})
    summary = summary_of(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary["status"] == "verified" and summary["best"]["speedup_vs_eager"]


def test_a_repeated_kernel_is_not_checked_again_and_the_coder_hears_which_it_repeats(
    agent: Agent, tmp_path: Path
) -> None:
    """The second reply is the first kernel with its docstring reworded and comments and
    blank lines added: it is recorded, never compiled, verified or profiled, and the next
    prompt says so."""
    original = Path(kernel("cpp_scale_add")["file"]).read_text()
    body = original.split('"""', 2)[2]  # the module docstring off
    repeated = tmp_path / "repeated.py"
    repeated.write_text(
        '"""The same kernel, reworded."""\n# a new comment\n\n' + body + "\n\n# end\n"
    )
    script = write_script(
        tmp_path, [kernel("cpp_scale_add"), {"file": str(repeated)}, kernel("cpp_scale_add_omp")]
    )
    proc = agent.run(script, "--max-iterations", "3", "--min-gain-pct", "0", "--record")
    summary = summary_of(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    rows = agent.query(
        "SELECT c.id, count(e.id) FROM candidates c LEFT JOIN evaluations e "
        "ON e.candidate_id = c.id WHERE c.run_id = ? GROUP BY c.id ORDER BY c.created_at",
        summary["run_id"],
    )
    assert [count for _, count in rows] == [2, 0, 2]  # verified and profiled; none; both
    assert "duplicate: the same kernel as candidate " + rows[0][0] in proc.stderr
    prompts = agent.query(
        "SELECT p.content FROM llm_calls l JOIN blobs p ON p.sha256 = l.prompt_blob "
        "WHERE l.run_id = ? AND l.node = 'coder' ORDER BY l.created_at",
        summary["run_id"],
    )
    assert "status: duplicate" in prompts[-1][0]
    tail = prompts[-1][0][prompts[-1][0].find("status: duplicate") :]
    assert "the same kernel as candidate" in tail and "which got: passed" in tail, tail[:600]
    assert "Write a different kernel" in tail and "Find the cause" not in tail
