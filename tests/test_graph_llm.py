"""Agent runs through the real langchain-openai client against a fake OpenAI-compatible
server on 127.0.0.1: structured output, keys, cost, record/replay and endpoint trouble."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_helpers import CASES, PLAN, SKETCH, TASK, Agent
from cli_helpers import json_line
from fake_openai import FOREVER, Error, FakeOpenAI

SECRET = "sk-test-DO-NOT-LEAK-4242"
KERNEL = (CASES / "kernels" / "cpp_scale_add.py").read_text()
CODE_REPLY = f"Here is the kernel:\n\n```python\n{KERNEL}```\n"


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    return Agent(tmp_path, env={"KERNELGRAPH_API_KEY": SECRET, "OPENAI_API_KEY": ""})


def run_llm(agent: Agent, url: str, *extra: str):
    return agent(
        "run", str(TASK), "--dsl", "cpp", "--device", "cpu", "--seeds", "1",
        "--model", "fake-model", "--base-url", url, "--endpoint-retries", "0", "--json",
        "--sol-target-pct", "1e9", *extra,
    )  # fmt: skip


def stored_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def test_a_run_through_the_openai_client(agent: Agent, fake: FakeOpenAI, tmp_path) -> None:
    for reply in (PLAN, SKETCH, CODE_REPLY):
        fake.add(reply)
    proc = run_llm(
        agent, fake.url, "--max-iterations", "1", "--price", "fake-model=1/2", "--record"
    )
    summary = json_line(proc)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert summary["status"] == "verified"
    assert summary["spend"]["llm_calls"] == 3 and summary["spend"]["usd"] > 0
    assert all(SECRET in r.headers.get("authorization", "") for r in fake.requests)
    assert SECRET.encode() not in stored_bytes(tmp_path)  # not in the DB, WAL or run files
    assert SECRET not in proc.stderr + proc.stdout

    # replay answers from the record: no endpoint at all
    seen = len(fake.requests)
    again = agent(
        "run", str(TASK), "--dsl", "cpp", "--device", "cpu", "--seeds", "1",
        "--replay", summary["run_id"], "--max-iterations", "1", "--json",
    )  # fmt: skip
    replayed = json_line(again)
    assert again.returncode == 0, again.stderr
    assert len(fake.requests) == seen
    first = agent.query("SELECT code_sha FROM candidates WHERE run_id = ?", summary["run_id"])
    second = agent.query("SELECT code_sha FROM candidates WHERE run_id = ?", replayed["run_id"])
    assert first == second


def test_endpoint_without_structured_output_falls_back(agent: Agent, fake: FakeOpenAI) -> None:
    fake.reject_json_schema = fake.reject_tools = True
    for reply in (json.dumps(PLAN), json.dumps(SKETCH), CODE_REPLY):
        fake.add(reply)
    proc = run_llm(agent, fake.url, "--max-iterations", "1")
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert {"text"} <= set().union(*(r.features() for r in fake.requests))


def test_auth_failure_is_not_retried(agent: Agent, fake: FakeOpenAI) -> None:
    fake.auth_fail = True
    proc = run_llm(agent, fake.url)
    summary = json_line(proc)
    assert proc.returncode == 2
    assert summary["stop_reason"] == "auth_failed"
    assert "KERNELGRAPH_API_KEY" in summary["message"]
    assert len(fake.requests) == 1
    assert SECRET not in proc.stderr + proc.stdout


def test_unreachable_endpoint_stops_resumably(agent: Agent) -> None:
    proc = run_llm(agent, "http://user:pw@127.0.0.1:9/v1")
    summary = json_line(proc)
    assert proc.returncode == 3
    assert (summary["status"], summary["stop_reason"]) == ("interrupted", "endpoint_down")
    assert "kernelgraph resume" in summary["message"]
    assert "pw@" not in proc.stderr + proc.stdout  # the URL is shown without credentials


def test_rate_limit_then_resume_with_budgets_across_sessions(agent: Agent, fake) -> None:
    fake.add(PLAN)
    fake.add(SKETCH)
    fake.add(Error(503, "overloaded"))
    proc = run_llm(agent, fake.url, "--max-llm-calls", "3")
    summary = json_line(proc)
    assert proc.returncode == 3, proc.stderr
    assert summary["status"] == "interrupted"

    fake.rate_limit = FOREVER
    limited = json_line(agent("resume", summary["run_id"], "--json"))
    assert limited["stop_reason"] in ("rate_limited", "endpoint_down")

    fake.rate_limit = 0
    fake.add(CODE_REPLY)
    done = agent("resume", summary["run_id"], "--json")
    final = json_line(done)
    assert done.returncode == 0, done.stderr
    # the budget counted the first session's calls: it stops before a refine
    assert final["stop_reason"] == "max_llm_calls"
    assert final["best"] is not None
