"""Candidate workers started ahead of their evaluation: taken only for the same settings, one
candidate each, discarded when stale or dead, and never left running."""

from __future__ import annotations

import os

import pytest

from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.harness.verdict import PASSED
from kernelgraph.tools.harness.warm import WARM_POOL, WarmPool
from kernelgraph.tools.harness.workers import WorkerSettings, spawn_worker

SETUP = {"device": "cpu", "precision": "fp32", "threads": 1, "dsl": "cpp"}


def evaluate_case(cases, tmp_path, kernel: str, **overrides):
    config = EvalConfig(**{"dsl": "cpp", "seeds": 1, "profile": False, **overrides})
    return evaluate(
        cases / "tasks/scale_add.py", cases / f"kernels/{kernel}.py", config,
        cache=EvalCache(tmp_path / "evals"),
    )  # fmt: skip


def idle_workers(pool: WarmPool) -> list:
    return list(pool._idle.values())


@pytest.fixture
def pool(tmp_path):
    own = WarmPool()
    with own.active():
        yield own
    assert idle_workers(own) == []


def spawn_candidate(folder, limit_s: float = 60):
    settings = WorkerSettings(limit_s=limit_s, host_limit=4 << 30, threads=1)
    return spawn_worker(folder / "candidate", "candidate", SETUP, settings, True, stdin=True)


def test_the_next_evaluation_takes_the_worker_started_ahead(cases, tmp_path):
    with WARM_POOL.active():
        first = evaluate_case(cases, tmp_path, "cpp_scale_add")
        (waiting,) = idle_workers(WARM_POOL)  # started once the first candidate was dead
        second = evaluate_case(cases, tmp_path, "cpp_scale_add_omp")
        wrong = evaluate_case(cases, tmp_path, "cpp_scale_sub")
    assert first.status == PASSED and "candidate.started_ahead_s" not in first.phases_s
    assert second.status == PASSED, second.message
    assert second.phases_s["candidate.started_ahead_s"] > 0
    assert wrong.status == "incorrect", wrong.message  # a warm worker judges like a cold one
    assert "candidate.started_ahead_s" in wrong.phases_s
    assert not waiting.worker.alive() and not waiting.folder.exists()  # used once, cleaned up
    assert idle_workers(WARM_POOL) == []  # the last user left: nothing keeps running


def test_nothing_starts_ahead_outside_a_long_running_caller(cases, tmp_path):
    for kernel in ("cpp_scale_add", "cpp_scale_add_omp"):
        verdict = evaluate_case(cases, tmp_path, kernel)
        assert verdict.status == PASSED and "candidate.started_ahead_s" not in verdict.phases_s
    assert idle_workers(WARM_POOL) == []


def test_other_settings_start_their_own_worker(cases, tmp_path):
    with WARM_POOL.active():
        evaluate_case(cases, tmp_path, "cpp_scale_add")
        other = evaluate_case(cases, tmp_path, "cpp_scale_add_omp", timeout_s=123)
    assert other.status == PASSED and "candidate.started_ahead_s" not in other.phases_s


@pytest.mark.parametrize("spoil", ["stale", "dead"])
def test_a_stale_or_dead_worker_is_discarded(pool, tmp_path, spoil):
    pool.refill("key", spawn_candidate)
    (warm,) = idle_workers(pool)
    if spoil == "dead":
        warm.worker.process.kill()
        warm.worker.process.wait()
    assert pool.take("key", max_age_s=0.0 if spoil == "stale" else 60) is None
    assert not warm.worker.alive() and not warm.folder.exists()


def test_one_worker_waits_per_settings(pool, tmp_path):
    pool.refill("key", spawn_candidate)
    pool.refill("key", spawn_candidate)  # one is already waiting: nothing new starts
    pool.refill("other", spawn_candidate)
    assert len(idle_workers(pool)) == 2
    taken = pool.take("key", max_age_s=60)
    assert taken is not None and taken.worker.alive()
    assert pool.take("key", max_age_s=60) is None
    taken.discard()


def test_leaving_kills_the_unused_workers(tmp_path):
    own = WarmPool()
    with own.active():
        own.refill("key", spawn_candidate)
        (warm,) = idle_workers(own)
        pid = warm.worker.process.proc.pid
    assert not warm.worker.alive() and not warm.folder.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    own.refill("key", spawn_candidate)  # off again: starts nothing
    assert idle_workers(own) == []
