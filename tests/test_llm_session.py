"""The LLM session with scripted and replayed models: call indices, bad replies asked again,
edits, budgets across sessions, tiers, accounting, and record then replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

import kernelgraph.nodes.llm.session as session_module
from kernelgraph.nodes.llm import (
    AuthFailed,
    BadReply,
    BudgetExhausted,
    EndpointDown,
    LLMSession,
    ModelConfigError,
    RateLimited,
    ReplayMissing,
    ScriptExhausted,
    open_session,
)
from kernelgraph.state.config import Limits, ModelConfig
from kernelgraph.state.llm_calls import calls_for_run, insert_call, node_spend
from kernelgraph.state.store import RunStore

KERNEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
PLAN = {"summary": "double it", "kernels": ["scale"]}


class Plan(BaseModel):
    summary: str
    kernels: list[str] = []


def messages(text: str = "write the kernel") -> list[dict]:
    return [{"role": "system", "content": "You write kernels."}, {"role": "user", "content": text}]


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("KERNELGRAPH_API_KEY", "OPENAI_API_KEY", "KERNELGRAPH_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def store(tmp_path: Path):
    with RunStore(tmp_path / "db.sqlite") as s:
        yield s


def new_run(store: RunStore) -> str:
    return store.create_run(kind="run", task_path="t.py", task_hash="x", dsl="cpp", device="cpu")


@pytest.fixture
def run_id(store: RunStore) -> str:
    return new_run(store)


@pytest.fixture
def script(tmp_path: Path):
    """write(dict) -> "script:PATH" for a script file in tmp_path."""

    def write(data: dict, name: str = "script.json") -> str:
        (tmp_path / "kernel.py").write_text(KERNEL)
        path = tmp_path / name
        path.write_text(json.dumps(data))
        return f"script:{path}"

    return write


def session(store, run_id, name, limits: Limits | None = None, **model) -> LLMSession:
    s = open_session(ModelConfig(name=name, **model), limits or Limits(), store, run_id)
    s.sleep = lambda seconds: pytest.fail(f"slept {seconds} s for a simulated model")
    return s


def statuses(store: RunStore, run_id: str) -> list[tuple[str, str]]:
    return [(c["node"], c["status"]) for c in calls_for_run(store, run_id)]


# --- scripts -----------------------------------------------------------------------------


def test_script_answers_by_node_and_call_index(store, run_id, script) -> None:
    name = script(
        {
            "planner": [{"json": PLAN}],
            "coder": [{"file": "kernel.py"}, f"```python\n{KERNEL}# v2\n```"],
            "any": [{"json": {"summary": "from any"}}],
        }
    )
    s = session(store, run_id, name)
    counts: dict[str, int] = {}
    assert s.ask_json("planner", messages(), Plan, counts) == Plan(**PLAN)
    assert s.ask_json("sketch_writer", messages(), Plan, counts).summary == "from any"
    first = s.ask_code("coder", messages(), counts)
    assert first.code == KERNEL and first.kind == "rewrite"
    assert store.get_blob(first.reply_sha) == f"```python\n{KERNEL}\n```"
    assert s.ask_code("coder", messages(), counts).code.endswith("# v2\n")
    assert counts == {"planner": 1, "sketch_writer": 1, "coder": 2}


def test_same_index_gives_the_same_reply_after_a_resume(store, run_id, script) -> None:
    name = script({"coder": [f"```python\n{KERNEL}```", f"```python\n{KERNEL}# 2\n```"]})
    checkpoint = {"coder": 1}  # as saved in the graph state before a crash
    answers = []
    for _ in range(2):  # the crashed session, then the resumed one
        counts = dict(checkpoint)
        answers.append(session(store, run_id, name).ask_code("coder", messages(), counts).code)
        assert counts == {"coder": 2}
    assert answers[0] == answers[1] and answers[0].endswith("# 2\n")


def test_script_runs_out(store, run_id, script) -> None:
    name = script({"coder": [{"file": "kernel.py"}]})
    with pytest.raises(ScriptExhausted) as info:
        session(store, run_id, name).ask_code("coder", messages(), {"coder": 1})
    message = str(info.value)
    assert "script.json" in message and "coder" in message and "reply 2" in message
    assert info.value.stop_reason == "script_exhausted"


@pytest.mark.parametrize(
    "error, raised, stop_reason, exit_code",
    [
        ("down", EndpointDown, "endpoint_down", 3),
        ("rate_limit", RateLimited, "rate_limited", 3),
        ("auth", AuthFailed, "auth_failed", 2),
    ],
)
def test_script_simulates_endpoint_errors(
    store, run_id, script, error, raised, stop_reason, exit_code
) -> None:
    s = session(store, run_id, script({"coder": [{"error": error}]}), endpoint_retries=3)
    counts: dict[str, int] = {}
    with pytest.raises(raised) as info:
        s.ask_code("coder", messages(), counts)
    assert (info.value.stop_reason, info.value.exit_code) == (stop_reason, exit_code)
    assert counts == {}  # nothing reached a model: the index is not used up
    assert calls_for_run(store, run_id) == []  # and nothing is recorded
    if error != "auth":
        assert f"kernelgraph resume {run_id}" in str(info.value)


@pytest.mark.parametrize(
    "content, fragment",
    [
        (None, "does not exist"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"coderr": []}', "unknown keys ['coderr']"),
        ('{"coder": "text"}', "must be a list"),
        ('{"coder": [{"text": "a", "json": 1}]}', "coder reply 1 must be"),
        ('{"coder": [{"error": "boom"}]}', "unknown error 'boom'"),
        ('{"coder": ["ok", {"file": "missing.py"}]}', "coder reply 2 names the file"),
        ('{"planner": [{"text": 3}]}', "not a string"),
    ],
)
def test_bad_script_files(store, run_id, tmp_path, content, fragment) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelConfigError) as info:
        session(store, run_id, f"script:{path}")
    assert fragment in str(info.value) and "bad.json" in str(info.value)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("name", [None, "", "builtin"])
def test_no_chat_model(store, run_id, name) -> None:
    with pytest.raises(ModelConfigError, match="--model"):
        open_session(ModelConfig(name=name), Limits(), store, run_id)


def test_unknown_run(store, script) -> None:
    with pytest.raises(ModelConfigError, match="no run r-missing"):
        session(store, "r-missing", script({}))


# --- bad replies and edits ---------------------------------------------------------------


def prompts_sent(store: RunStore, run_id: str) -> list[list[dict]]:
    return [
        json.loads(store.get_blob(c["prompt_blob"]))["messages"]
        for c in calls_for_run(store, run_id)
    ]


def test_bad_replies_are_asked_again_with_what_was_wrong(store, run_id, script) -> None:
    name = script(
        {
            "coder": [
                {"truncated": "```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n"},
                "I would write a fast kernel here.",
                {"file": "kernel.py"},
            ]
        }
    )
    counts: dict[str, int] = {}
    answer = session(store, run_id, name, record=True).ask_code("coder", messages(), counts)
    assert answer.code == KERNEL
    assert counts == {"coder": 3}  # each retry is a real call
    assert statuses(store, run_id) == [("coder", "bad_reply")] * 2 + [("coder", "ok")]
    sent = prompts_sent(store, run_id)
    assert sent[0] == messages()
    assert sent[1][-2]["role"] == "assistant" and "cut off" in sent[1][-1]["content"]
    assert "no Python code" in sent[2][-1]["content"] and len(sent[2]) == 6
    assert calls_for_run(store, run_id)[0]["error"].startswith("truncated")


def test_bad_json_then_good_json(store, run_id, script) -> None:
    name = script({"planner": ['{"kernels": "x"}', {"json": PLAN}]})
    s = session(store, run_id, name, record=True)
    assert s.ask_json("planner", messages(), Plan, {}) == Plan(**PLAN)
    follow_up = prompts_sent(store, run_id)[1][-1]["content"]
    assert "summary: Field required" in follow_up
    # the scripted model got the schema in its system message (JSON in text)
    assert statuses(store, run_id) == [("planner", "bad_reply"), ("planner", "ok")]


def test_replies_that_stay_bad_raise_bad_reply(store, run_id, script) -> None:
    name = script({"coder": ["no code", "still no code", "never"]})
    with pytest.raises(BadReply) as info:
        session(store, run_id, name, bad_reply_retries=1).ask_code("coder", messages(), {})
    assert "2 replies" in str(info.value) and "no Python code" in str(info.value)
    assert (info.value.stop_reason, info.value.exit_code) == ("bad_reply", 1)
    assert len(calls_for_run(store, run_id)) == 2


def test_edit_answer_gives_the_full_file(store, run_id, script) -> None:
    edit = "<<<<<<< SEARCH\n        return x * 2\n=======\n        return x * 3\n>>>>>>> REPLACE"
    s = session(store, run_id, script({"coder": [edit]}))
    answer = s.ask_code("coder", messages(), {}, current_code=KERNEL)
    assert answer.kind == "edit" and answer.code == KERNEL.replace("x * 2", "x * 3")


def test_an_edit_that_does_not_apply_asks_for_a_rewrite(store, run_id, script) -> None:
    edit = "<<<<<<< SEARCH\n        return x * 7\n=======\n        return x * 3\n>>>>>>> REPLACE"
    name = script({"coder": [edit, {"file": "kernel.py"}]})
    s = session(store, run_id, name, record=True, bad_reply_retries=0)
    answer = s.ask_code("coder", messages(), {}, current_code=KERNEL.replace("2", "5"))
    assert answer.kind == "rewrite" and answer.code == KERNEL  # one more call, even with 0
    follow_up = prompts_sent(store, run_id)[1][-1]["content"]
    assert "Edit block 1 did not apply" in follow_up and "rewrite" in follow_up


# --- budgets and accounting --------------------------------------------------------------


def test_call_budget_counts_across_sessions_and_stops_before_the_call(
    store, run_id, script
) -> None:
    name = script({"coder": [{"file": "kernel.py"}] * 5})
    limits = Limits(max_llm_calls=3)
    counts: dict[str, int] = {}
    first = session(store, run_id, name, limits)
    first.ask_code("coder", messages(), counts)
    first.ask_code("coder", messages(), counts)
    resumed = session(store, run_id, name, limits)  # a resume: a new session, same run
    resumed.ask_code("coder", messages(), counts)
    with pytest.raises(BudgetExhausted) as info:
        resumed.ask_code("coder", messages(), counts)
    assert info.value.stop_reason == "max_llm_calls" and "3" in str(info.value)
    assert counts == {"coder": 3} and resumed.spend()["llm_calls"] == 3
    other = new_run(store)  # another run has its own budget
    session(store, other, name, limits).ask_code("coder", messages(), {})


def test_a_call_being_recorded_counts_once_and_a_failed_one_not_at_all(
    store, run_id, script, monkeypatch
) -> None:
    """A search's branches share one session: a branch checking the budget while another
    branch's call is being recorded must count that call once (counted both as recorded and
    as under way, it stopped a lane early)."""
    name = script({"coder": [{"file": "kernel.py"}] * 4, "planner": [{"error": "down"}]})
    s = session(store, run_id, name, Limits(max_llm_calls=4))
    seen: list[int] = []
    write = session_module.record_call

    def watched(*args, **kwargs):
        reply_sha = write(*args, **kwargs)
        seen.append(s.budget.calls_counted())  # what any other branch would see now
        return reply_sha

    monkeypatch.setattr(session_module, "record_call", watched)
    counts: dict[str, int] = {}
    for _ in range(3):
        s.ask_code("coder", messages(), counts)
    assert seen == [1, 2, 3]
    with pytest.raises(EndpointDown):
        s.ask_json("planner", messages(), Plan, counts)
    assert s.budget.calls_counted() == 3  # the failed call holds no place
    s.ask_code("coder", messages(), counts)
    with pytest.raises(BudgetExhausted):
        s.ask_code("coder", messages(), counts)


def test_usd_budget_counts_what_the_run_already_spent(store, run_id, script) -> None:
    name = script({"coder": [{"file": "kernel.py"}]})
    insert_call(store, run_id=run_id, node="coder", model="m", prompt_sha="p", usd=0.25)
    s = session(store, run_id, name, Limits(budget_usd=0.5))
    s.ask_code("coder", messages(), {})  # scripted: free
    insert_call(store, run_id=run_id, node="coder", model="m", prompt_sha="p", usd=0.3)
    with pytest.raises(BudgetExhausted) as info:
        s.ask_code("coder", messages(), {})
    assert info.value.stop_reason == "budget_usd" and "0.5" in str(info.value)


def test_budget_usd_needs_a_price(store, run_id) -> None:
    model = {"base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(ModelConfigError) as info:
        session(store, run_id, "some-model", Limits(budget_usd=1.0), **model)
    assert "--price some-model=IN/OUT" in str(info.value)
    priced = {"prices": {"some-model": {"input": 1.0, "output": 2.0}}}
    session(store, run_id, "some-model", Limits(budget_usd=1.0), **model, **priced)


def test_spend_sums_tokens_and_knows_when_usd_is_unknown(store, run_id, script) -> None:
    s = session(store, run_id, script({"planner": [{"json": PLAN}]}))
    assert s.spend() == {"llm_calls": 0, "tokens_in": 0, "tokens_out": 0, "usd": 0.0}
    s.ask_json("planner", messages(), Plan, {})
    spend = s.spend()
    assert spend["llm_calls"] == 1 and spend["tokens_in"] > 0 and spend["tokens_out"] > 0
    assert spend["usd"] == 0.0
    insert_call(store, run_id=run_id, node="coder", model="m", prompt_sha="p", usd=None)
    assert s.spend()["usd"] is None and s.spend()["llm_calls"] == 2
    assert set(node_spend(store, run_id)) == {"planner", "coder"}


def test_prompt_text_is_kept_only_when_recording(store, run_id, script) -> None:
    name = script({"planner": [{"json": PLAN}] * 2})
    session(store, run_id, name).ask_json("planner", messages(), Plan, {})
    session(store, run_id, name, record=True).ask_json("planner", messages(), Plan, {"planner": 1})
    plain, recorded = calls_for_run(store, run_id)
    assert plain["prompt_blob"] is None and not plain["recorded"]
    assert recorded["recorded"] and recorded["prompt_blob"] == recorded["prompt_sha"]
    assert plain["prompt_sha"] == recorded["prompt_sha"]  # the key does not depend on the model


def test_cheap_tier_answers_its_nodes(store, run_id, script) -> None:
    cheap = script({"planner": [{"json": PLAN}]}, name="cheap.json")
    main = script({"planner": ["never asked"], "coder": [{"file": "kernel.py"}]})
    s = session(store, run_id, main, cheap_name=cheap, cheap_nodes=["planner"])
    s.ask_json("planner", messages(), Plan, {})
    s.ask_code("coder", messages(), {})
    models = {c["node"]: c["model"] for c in calls_for_run(store, run_id)}
    assert models == {"planner": cheap, "coder": main}
    assert "cheap.json" in s.describe() and "planner" in s.describe()


# --- record and replay -------------------------------------------------------------------


def run_agent_steps(s: LLMSession) -> tuple:
    counts: dict[str, int] = {}
    plan = s.ask_json("planner", messages("plan"), Plan, counts)
    sketch = s.ask_json("sketch_writer", messages("sketch"), Plan, counts)
    first = s.ask_code("coder", messages("code"), counts)
    again = s.ask_code("coder", messages("code"), counts)  # the same prompt, a second time
    return plan, sketch, first.code, again.code, counts


def test_record_then_replay_without_any_model(store, run_id, script, tmp_path) -> None:
    name = script(
        {
            "planner": [{"json": PLAN}],
            "sketch_writer": ["not json", {"json": {"summary": "sketch"}}],
            "coder": [
                {"truncated": "```python\nclass ModelNew:"},
                {"file": "kernel.py"},
                f"```python\n{KERNEL}# second\n```",
            ],
        }
    )
    recorded = run_agent_steps(session(store, run_id, name, record=True))
    (tmp_path / "script.json").unlink()  # the replay cannot use the script
    replay_run = new_run(store)
    replayed = run_agent_steps(session(store, replay_run, f"replay:{run_id}"))
    assert replayed == recorded
    assert recorded[3].endswith("# second\n")  # k-th ask of a prompt gets the k-th reply
    rows = calls_for_run(store, replay_run)
    assert [r["status"] for r in rows] == [c["status"] for c in calls_for_run(store, run_id)]
    assert {r["model"] for r in rows} == {f"replay:{run_id}"} and {r["usd"] for r in rows} == {0.0}

    with pytest.raises(ReplayMissing) as info:
        session(store, new_run(store), f"replay:{run_id}").ask_json(
            "planner", messages("a changed prompt"), Plan, {}
        )
    assert "planner" in str(info.value) and "prompts changed" in str(info.value)
    assert (info.value.stop_reason, info.value.exit_code) == ("replay_missing", 2)


def test_replaying_a_branch_uses_its_ancestors(store, run_id, script) -> None:
    name = script({"planner": [{"json": PLAN}], "coder": [{"file": "kernel.py"}]})
    session(store, run_id, name, record=True).ask_json("planner", messages("plan"), Plan, {})
    branch = store.create_run(
        kind="run", task_path="t.py", task_hash="x", dsl="cpp", device="cpu",
        parent_run_id=run_id,
    )  # fmt: skip
    session(store, branch, name, record=True).ask_code("coder", messages(), {})
    replay = session(store, new_run(store), f"replay:{branch}")
    assert replay.ask_json("planner", messages("plan"), Plan, {}) == Plan(**PLAN)
    assert replay.ask_code("coder", messages(), {}).code == KERNEL


def test_replay_needs_a_recorded_run(store, run_id, script) -> None:
    session(store, run_id, script({"planner": [{"json": PLAN}]})).ask_json(
        "planner", messages(), Plan, {}
    )
    other = new_run(store)
    with pytest.raises(ModelConfigError, match="--record"):
        session(store, other, f"replay:{run_id}")
    with pytest.raises(ModelConfigError, match="no run r-nope"):
        session(store, other, "replay:r-nope")
