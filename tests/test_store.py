import re
import sqlite3
import threading

import pytest

from kernelgraph.state.models import validate_verdict
from kernelgraph.state.store import RunStore, open_store
from kernelgraph.tools.harness.verdict import Check, Failure, Timing, Verdict


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "sub" / "kg.db") as s:
        yield s


def make_verdict(cache_key="k1", status="passed", kernel_ms=0.5) -> dict:
    return Verdict(
        status=status,
        message="ok",
        dsl="triton",
        device="cuda",
        policy="strict",
        precision="fp32",
        checks=[Check("correctness", status == "passed")],
        failure=None if status == "passed" else Failure("correctness", "mismatch", seed=1),
        timing=Timing(kernel_ms=kernel_ms, eager_ms=1.0, speedup_vs_eager=1.0 / kernel_ms),
        sol_pct=42.0,
        env={"gpu_name": "NVIDIA H100 80GB HBM3"},
        cache_key=cache_key,
    ).to_dict()


def test_default_path_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGRAPH_DB", str(tmp_path / "env.db"))
    with open_store() as s:
        assert s.path == tmp_path / "env.db"
    monkeypatch.delenv("KERNELGRAPH_DB")
    monkeypatch.chdir(tmp_path)
    with open_store() as s:
        assert s.path == tmp_path / "runs" / "kernelgraph.db" and s.path.exists()


def test_wal_mode_and_busy_timeout(store):
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
    # WAL is a property of the file: a plain sqlite3 connection (like LangGraph's) sees it too.
    with sqlite3.connect(store.path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_round_trip(store):
    run_id = store.create_run("evaluate", "tasks/relu.py", "abc123", "triton", "cuda", {"seeds": 3})
    assert re.fullmatch(r"r-\d{8}-[0-9a-f]{4}", run_id)
    parent = store.add_candidate("def f(): pass\n", "triton", run_id=run_id, label="first")
    child = store.add_candidate("def g(): pass\n", "triton", run_id=run_id, parent_id=parent)
    verdict = make_verdict()
    eval_id = store.record_evaluation(child, verdict)
    store.set_run_status(run_id, "done")

    run = store.get_run(run_id)
    assert run["status"] == "done" and run["config"] == {"seeds": 3}
    assert [r["id"] for r in store.list_runs()] == [run_id]
    cand = store.get_candidate(child)
    assert cand["code"] == "def g(): pass\n" and cand["parent_id"] == parent
    (ev,) = store.evaluations_for_run(run_id)
    assert ev["id"] == eval_id and ev["candidate_id"] == child
    assert ev["kernel_ms"] == 0.5 and ev["sol_pct"] == 42.0 and ev["status"] == "passed"
    assert ev["verdict"] == verdict and ev["env"] == verdict["env"]
    assert Verdict.from_dict(ev["verdict"]) == Verdict.from_dict(verdict)


def test_unknown_run_status_update_raises(store):
    with pytest.raises(KeyError):
        store.set_run_status("r-19700101-0000", "done")


def test_foreign_keys_enforced(store):
    with pytest.raises(Exception, match="FOREIGN KEY"):
        store.record_evaluation("c-missing", make_verdict())


def test_blob_dedup(store):
    sha = store.put_blob("same text", "log")
    assert store.put_blob("same text", "log") == sha
    assert store.get_blob(sha) == "same text"
    assert store.get_blob("0" * 64) is None
    # Two candidates with the same code share one blob.
    a, b = store.add_candidate("x = 1", "triton"), store.add_candidate("x = 1", "triton")
    assert a != b
    assert store.get_candidate(a)["code_sha"] == store.get_candidate(b)["code_sha"]
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM blobs").scalar() == 2


def test_find_evaluation_by_cache_key(store):
    cand = store.add_candidate("code", "triton")
    store.record_evaluation(cand, make_verdict("key-a", kernel_ms=2.0))
    newest = store.record_evaluation(cand, make_verdict("key-a", kernel_ms=1.0))
    store.record_evaluation(cand, make_verdict("key-b", status="incorrect"))
    found = store.find_evaluation("key-a")
    assert found["id"] == newest and found["verdict"]["timing"]["kernel_ms"] == 1.0
    assert store.find_evaluation("key-b")["status"] == "incorrect"
    assert store.find_evaluation("missing") is None
    assert store.find_evaluation("") is None


def test_secret_like_config_keys_dropped(store):
    config = {
        "model": "gpt-x",
        "OPENAI_API_KEY": "sk-1",
        "authToken": "t",
        "nested": {"client_secret": "s", "iterations": 4},
        "list": [{"apikey": "k", "ok": 1}],
    }
    run_id = store.create_run("run", "t.py", "h", "triton", "cuda", config)
    assert store.get_run(run_id)["config"] == {
        "model": "gpt-x",
        "nested": {"iterations": 4},
        "list": [{"ok": 1}],
    }
    assert b"sk-1" not in store.path.read_bytes()


def test_two_stores_on_one_file_both_write(tmp_path):
    path = tmp_path / "shared.db"
    with RunStore(path) as a, RunStore(path) as b:
        run_a = a.create_run("run", "t.py", "h", "triton", "cuda")
        run_b = b.create_run("run", "t.py", "h", "triton", "cuda")
        assert {r["id"] for r in a.list_runs()} == {run_a, run_b}
        assert b.get_run(run_a)["task_path"] == "t.py"


def test_concurrent_writers_wait_instead_of_failing(tmp_path):
    path = tmp_path / "busy.db"
    stores = [RunStore(path) for _ in range(4)]
    errors = []

    def write(s: RunStore) -> None:
        try:
            for i in range(25):
                cand = s.add_candidate(f"code {i}", "triton")
                s.record_evaluation(cand, make_verdict(f"k{i}"))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with stores[0].engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM evaluations").scalar() == 100
    for s in stores:
        s.close()


def test_verdicts_validate_against_the_harness_schema():
    verdict = make_verdict(status="incorrect")
    result = validate_verdict(verdict)
    assert isinstance(result, Verdict) and isinstance(result.failure, Failure)
    assert not result.passed and result.failure.seed == 1
    assert result.timing.kernel_ms == 0.5
    assert result.to_dict() == verdict
    with pytest.raises(ValueError, match="unknown verdict status"):
        validate_verdict({**verdict, "status": "great"})
    with pytest.raises(ValueError):
        validate_verdict({**verdict, "checks": [{"name": "x", "passed": "maybe"}]})


def test_langgraph_checkpointer_shares_the_file(store):
    sqlite_saver = pytest.importorskip("langgraph.checkpoint.sqlite")
    conn = sqlite3.connect(store.path, check_same_thread=False)
    try:
        sqlite_saver.SqliteSaver(conn).setup()
        run_id = store.create_run("run", "t.py", "h", "triton", "cuda")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"checkpoints", "runs", "evaluations"} <= tables
        assert conn.execute("SELECT id FROM runs").fetchone()[0] == run_id
    finally:
        conn.close()
