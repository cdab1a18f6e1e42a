"""The real langchain-openai client against a fake OpenAI-compatible endpoint: structured
output and its fallbacks, retries and backoff, auth and rejected requests, and keys that never
reach the run store."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from fake_openai import FOREVER, Error, FakeOpenAI, Reply
from pydantic import BaseModel

from kernelgraph.nodes.llm import (
    AuthFailed,
    EndpointDown,
    LLMError,
    LLMSession,
    ModelConfigError,
    RateLimited,
    open_session,
)
from kernelgraph.nodes.llm.openai_chat import OpenAIChat, display_url
from kernelgraph.nodes.llm.retry import RETRY_AFTER_CAP_S
from kernelgraph.state.config import Limits, ModelConfig
from kernelgraph.state.llm_calls import calls_for_run
from kernelgraph.state.store import RunStore

KERNEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
PLAN = {"summary": "double it", "kernels": ["scale"]}
PRICE = {"fake-model": {"input": 1.0, "output": 2.0}}
SECRET = "sk-test-0123456789-very-secret"


class Plan(BaseModel):
    summary: str
    kernels: list[str] = []


MESSAGES = [{"role": "system", "content": "You plan."}, {"role": "user", "content": "go"}]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "KERNELGRAPH_API_KEY", "OPENAI_API_KEY", "KERNELGRAPH_BASE_URL", "OPENAI_BASE_URL",
        "OPENAI_API_BASE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
        "https_proxy", "all_proxy",
    ):  # fmt: skip
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def store(tmp_path: Path):
    with RunStore(tmp_path / "db.sqlite") as s:
        yield s


@pytest.fixture
def run_id(store: RunStore) -> str:
    return store.create_run(kind="run", task_path="t.py", task_hash="x", dsl="cpp", device="cpu")


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def connect(store, run_id, url, limits: Limits | None = None, **model) -> LLMSession:
    settings = {"name": "fake-model", "base_url": url, "backoff_s": 0, "prices": PRICE} | model
    s = open_session(ModelConfig(**settings), limits or Limits(), store, run_id)
    s.sleep = Sleeps()
    return s


# --- structured output -------------------------------------------------------------------


def test_structured_call_is_priced_from_reported_usage(store, run_id, fake) -> None:
    fake.add(Reply(json=PLAN, usage=(1000, 500)))
    s = connect(store, run_id, fake.url)
    counts: dict[str, int] = {}
    assert s.ask_json("planner", MESSAGES, Plan, counts) == Plan(**PLAN)
    assert counts == {"planner": 1}
    (request,) = fake.requests
    assert request.features() == {"json_schema"} and request.body["model"] == "fake-model"
    assert s.spend() == {"llm_calls": 1, "tokens_in": 1000, "tokens_out": 500, "usd": 0.002}
    assert s.describe() == f"fake-model @ {fake.url}"


@pytest.mark.parametrize(
    "switches, first_call, used",
    [
        ({}, [{"json_schema"}], {"json_schema"}),
        ({"reject_json_schema": True}, [{"json_schema"}, {"tools"}], {"tools"}),
        (
            {"reject_json_schema": True, "reject_tools": True},
            [{"json_schema"}, {"tools"}, {"text"}],
            {"text"},
        ),
    ],
    ids=["native", "tool-call", "json-in-text"],
)
def test_structured_output_falls_back_and_remembers(
    store, run_id, fake, switches, first_call, used
) -> None:
    for name, value in switches.items():
        setattr(fake, name, value)
    fake.add(PLAN, PLAN)
    s = connect(store, run_id, fake.url)
    counts: dict[str, int] = {}
    assert s.ask_json("planner", MESSAGES, Plan, counts) == Plan(**PLAN)
    assert [r.features() for r in fake.requests] == first_call
    assert s.ask_json("planner", MESSAGES, Plan, counts) == Plan(**PLAN)
    assert fake.requests[-1].features() == used and len(fake.requests) == len(first_call) + 1
    assert counts == {"planner": 2} and s.spend()["llm_calls"] == 2  # refusals are not calls
    if used == {"text"}:
        assert '"summary"' in fake.requests[-1].messages[0]["content"]  # the schema


def test_bad_structured_reply_is_asked_again(store, run_id, fake) -> None:
    fake.add(Reply(text='{"summary": "dou', finish_reason="length"), {"kernels": []}, PLAN)
    s = connect(store, run_id, fake.url)
    assert s.ask_json("planner", MESSAGES, Plan, {}) == Plan(**PLAN)
    second, third = fake.requests[1].messages, fake.requests[2].messages
    assert "cut off" in second[-1]["content"]
    assert "summary: Field required" in third[-1]["content"]
    assert [c["status"] for c in calls_for_run(store, run_id)] == ["bad_reply"] * 2 + ["ok"]


def test_code_is_asked_as_plain_text(store, run_id, fake) -> None:
    fake.add(f"Here:\n```python\n{KERNEL}```")
    answer = connect(store, run_id, fake.url).ask_code("coder", MESSAGES, {})
    assert answer.code == KERNEL and fake.requests[0].features() == {"text"}


# --- endpoint errors ---------------------------------------------------------------------


def test_auth_failure_is_not_retried(store, run_id, fake, monkeypatch) -> None:
    monkeypatch.setenv("KERNELGRAPH_API_KEY", SECRET)
    fake.auth_fail = True
    s = connect(store, run_id, fake.url, endpoint_retries=4)
    counts: dict[str, int] = {}
    with pytest.raises(AuthFailed) as info:
        s.ask_json("planner", MESSAGES, Plan, counts)
    assert len(fake.requests) == 1 and s.sleep == []
    assert "KERNELGRAPH_API_KEY" in str(info.value) and SECRET not in str(info.value)
    assert (info.value.stop_reason, info.value.exit_code) == ("auth_failed", 2)
    assert counts == {} and calls_for_run(store, run_id) == []


def test_rate_limit_then_success(store, run_id, fake) -> None:
    fake.rate_limit = 1
    fake.add(PLAN)
    s = connect(store, run_id, fake.url, backoff_s=1.5)
    assert s.ask_json("planner", MESSAGES, Plan, {}) == Plan(**PLAN)
    assert [r.status for r in fake.requests] == [429, 200]
    assert s.sleep == [1.5] and s.spend()["llm_calls"] == 1


@pytest.mark.parametrize("retry_after, waited", [(7, 7.0), (10_000, RETRY_AFTER_CAP_S)])
def test_retry_after_is_honoured_up_to_a_cap(store, run_id, fake, retry_after, waited) -> None:
    fake.rate_limit, fake.retry_after = 1, retry_after
    fake.add(PLAN)
    s = connect(store, run_id, fake.url, backoff_s=1)
    s.ask_json("planner", MESSAGES, Plan, {})
    assert s.sleep == [waited]


def test_rate_limited_forever_stops_resumably(store, run_id, fake) -> None:
    fake.rate_limit = FOREVER
    s = connect(store, run_id, fake.url, endpoint_retries=3, backoff_s=0.5)
    with pytest.raises(RateLimited) as info:
        s.ask_json("planner", MESSAGES, Plan, {})
    assert isinstance(info.value, EndpointDown)
    assert len(fake.requests) == 4 and s.sleep == [0.5, 1.0, 2.0]
    assert (info.value.stop_reason, info.value.exit_code) == ("rate_limited", 3)
    assert f"kernelgraph resume {run_id}" in str(info.value)
    assert calls_for_run(store, run_id) == []


def test_server_errors_are_retried(store, run_id, fake) -> None:
    fake.add(Error(503, "overloaded"), Error(500, "oops"), PLAN)
    s = connect(store, run_id, fake.url, endpoint_retries=2)
    assert s.ask_json("planner", MESSAGES, Plan, {}) == Plan(**PLAN)
    assert [r.status for r in fake.requests] == [503, 500, 200]


def test_unreachable_endpoint(store, run_id) -> None:
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = connect(store, run_id, f"http://127.0.0.1:{port}/v1", endpoint_retries=2)
    with pytest.raises(EndpointDown) as info:
        s.ask_code("coder", MESSAGES, {})
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and f"kernelgraph resume {run_id}" in message
    assert (info.value.stop_reason, info.value.exit_code) == ("endpoint_down", 3)
    assert len(s.sleep) == 2


def test_a_silent_endpoint_times_out(store, run_id) -> None:
    import socket

    with socket.socket() as sock:  # accepts connections (the kernel's backlog), never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        s = connect(store, run_id, url, endpoint_retries=1, request_timeout_s=0.2)
        with pytest.raises(EndpointDown, match="no answer within 0.2 s"):
            s.ask_code("coder", MESSAGES, {})
    assert len(s.sleep) == 1


def test_other_client_errors_carry_the_server_message(store, run_id, fake) -> None:
    fake.add(Error(404, "The model `fake-model` does not exist"))
    s = connect(store, run_id, fake.url)
    with pytest.raises(LLMError, match="does not exist"):
        s.ask_json("planner", MESSAGES, Plan, {})
    assert len(fake.requests) == 1  # not taken for "no structured output": no fallback
    (row,) = calls_for_run(store, run_id)
    assert row["status"] == "error" and "does not exist" in row["error"]


# --- keys and URLs -----------------------------------------------------------------------


def test_the_key_never_reaches_the_store(store, run_id, fake, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("KERNELGRAPH_API_KEY", SECRET)
    fake.reject_json_schema = True
    fake.add(PLAN, f"```python\n{KERNEL}```", "no code at all", Error(400, "bad request"))
    s = connect(store, run_id, fake.url, record=True, bad_reply_retries=0)
    s.ask_json("planner", MESSAGES, Plan, {})
    s.ask_code("coder", MESSAGES, {})
    errors = []
    for _ in range(2):
        try:
            s.ask_code("coder", MESSAGES, {})
        except LLMError as exc:
            errors.append(str(exc))
    fake.auth_fail = True
    with pytest.raises(AuthFailed) as info:
        s.ask_code("coder", MESSAGES, {})
    errors.append(str(info.value))
    assert len(errors) == 3 and not any(SECRET in e for e in errors)
    assert {r.headers["authorization"] for r in fake.requests} == {f"Bearer {SECRET}"}
    assert SECRET not in s.describe()

    store.update_run(run_id, config={"model": {"name": "fake-model"}})
    seen = 0
    with sqlite3.connect(store.path) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                seen += 1
                assert not any(SECRET in str(v) for v in row), (table, row)
    assert seen > 5
    for path in tmp_path.glob("db.sqlite*"):  # the file and its WAL, byte by byte
        assert SECRET.encode() not in path.read_bytes()


def test_a_key_echoed_by_the_server_is_masked(store, run_id, fake, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    fake.add(Error(422, f"invalid key {SECRET} for this project"))
    with pytest.raises(LLMError) as info:
        connect(store, run_id, fake.url).ask_code("coder", MESSAGES, {})
    assert SECRET not in str(info.value) and "invalid key ***" in str(info.value)
    assert SECRET not in calls_for_run(store, run_id)[0]["error"]


def test_base_url_must_be_http(store, run_id) -> None:
    with pytest.raises(ModelConfigError, match="not an http"):
        connect(store, run_id, "localhost:8000/v1")


def test_missing_key_for_a_remote_endpoint(store, run_id) -> None:
    with pytest.raises(ModelConfigError) as info:
        connect(store, run_id, "https://user:pw@llm.example.com/v1?token=abc")
    message = str(info.value)
    assert "KERNELGRAPH_API_KEY" in message and "https://llm.example.com/v1" in message
    assert "pw" not in message and "abc" not in message


def test_local_endpoint_runs_without_a_key(store, run_id, fake) -> None:
    fake.add(PLAN)
    connect(store, run_id, fake.url).ask_json("planner", MESSAGES, Plan, {})
    assert fake.requests[0].headers["authorization"] == "Bearer not-needed"


def test_openai_api_key_and_base_url_from_the_environment(store, run_id, fake, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other")
    monkeypatch.setenv("KERNELGRAPH_BASE_URL", fake.url)
    fake.add(PLAN)
    s = connect(store, run_id, None)
    s.ask_json("planner", MESSAGES, Plan, {})
    assert fake.requests[0].headers["authorization"] == "Bearer sk-other"


@pytest.mark.parametrize(
    "url, shown",
    [
        ("https://user:pass@host.example/v1?key=1#frag", "https://host.example/v1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
        (None, "https://api.openai.com/v1"),
    ],
)
def test_urls_are_shown_without_credentials(url, shown, monkeypatch) -> None:
    assert display_url(url) == shown
    monkeypatch.setenv("KERNELGRAPH_API_KEY", SECRET)
    chat = OpenAIChat("m", url, ModelConfig(name="m"))
    assert chat.describe() == f"m @ {shown}"


# --- the fake as a server for other processes --------------------------------------------


def test_fake_is_reachable_from_a_subprocess(fake) -> None:
    code = f"import urllib.request; print(urllib.request.urlopen('{fake.url}/models').status)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "200" and fake.requests[0].path == "/v1/models"


def test_fake_runs_as_its_own_process(store, run_id, tmp_path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([{"json": PLAN}]))
    log = tmp_path / "requests.jsonl"
    script = Path(__file__).with_name("fake_openai.py")
    cmd = [sys.executable, str(script), str(replies), "--log", str(log), "--reject-tools"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert urllib.request.urlopen(f"{url}/models").status == 200
        s = connect(store, run_id, url)
        assert s.ask_json("planner", MESSAGES, Plan, {}) == Plan(**PLAN)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["status"] for r in logged] == [200, 200]
