"""The reference store: a task's inputs, reference outputs and baselines are made once per
machine and reused by every candidate, hidden from candidates, and never mistaken for another
machine's or another task's."""

from __future__ import annotations

import pytest

from kernelgraph.tools.harness import evaluation as evaluation_module
from kernelgraph.tools.harness import infra, refstore
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.harness.sandbox import isolation
from kernelgraph.tools.harness.verdict import PASSED, HarnessError

pytestmark = pytest.mark.skipif(
    not isolation().hides_paths, reason="the store is used only where the sandbox hides folders"
)


@pytest.fixture
def store_root(tmp_path, monkeypatch):
    """A store of this test's own, so that what it counts is its own doing."""
    monkeypatch.setenv("KERNELGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "refs"


def run(cases, tmp_path, kernel="cpp_scale_add", **overrides):
    settings = {"dsl": "cpp", "seeds": 2, "profile": True, "timeout_s": 120, **overrides}
    use_cache = settings.pop("use_cache", True)
    return evaluate(
        cases / "tasks/scale_add.py", cases / f"kernels/{kernel}.py", EvalConfig(**settings),
        cache=EvalCache(tmp_path / f"evals-{kernel}-{use_cache}"), use_cache=use_cache,
    )  # fmt: skip


def entries(store_root):
    return sorted(p.name for p in (store_root / "inputs").iterdir())


def test_the_second_candidate_reuses_the_reference_and_its_baseline(cases, tmp_path, store_root):
    first = run(cases, tmp_path)
    assert first.status == PASSED, first.message
    assert first.reference == {"stored": True, "cached": False, "build_s": pytest.approx(
        first.reference["build_s"])}  # fmt: skip
    assert "prepare" in first.phases_s and not first.timing.baseline_cached
    second = run(cases, tmp_path, kernel="cpp_scale_add_omp")  # another kernel, same task
    assert second.status == PASSED, second.message
    assert second.reference["cached"] and "prepare" not in second.phases_s
    assert second.timing.baseline_cached
    assert second.timing.eager_ms == first.timing.eager_ms  # one baseline, not re-timed
    assert len(entries(store_root)) == 1
    (key,) = entries(store_root)
    assert sorted(p.name for p in (store_root / "expected" / key).glob("*.tf")) == [
        "expected_42.tf", "expected_43.tf"
    ]  # fmt: skip


def test_a_wrong_kernel_fails_against_stored_reference_outputs(cases, tmp_path, store_root):
    assert run(cases, tmp_path).status == PASSED  # builds the store
    wrong = run(cases, tmp_path, kernel="cpp_scale_sub")
    assert wrong.reference["cached"]
    assert wrong.status == "incorrect", wrong.message


def test_no_cache_uses_no_store_and_recomputes_the_reference(cases, tmp_path, store_root):
    verdict = run(cases, tmp_path, use_cache=False)
    assert verdict.status == PASSED, verdict.message
    assert verdict.reference["stored"] is False and not verdict.timing.baseline_cached
    assert not (store_root / "inputs").exists() or entries(store_root) == []
    wrong = run(cases, tmp_path, kernel="cpp_scale_sub", use_cache=False)
    assert wrong.status == "incorrect", wrong.message  # judged on recomputed outputs


def test_a_half_built_entry_is_built_again(cases, tmp_path, store_root):
    assert run(cases, tmp_path).status == PASSED
    (key,) = entries(store_root)
    (store_root / "inputs" / key / "meta.json").unlink()  # as if killed mid-build
    again = run(cases, tmp_path, kernel="cpp_scale_add_omp")
    assert again.status == PASSED and not again.reference["cached"]
    assert (store_root / "inputs" / key / "meta.json").exists()


def test_another_machine_gets_its_own_entry(cases, tmp_path, store_root, monkeypatch):
    assert run(cases, tmp_path).status == PASSED
    other = {**refstore.fingerprint("cpu"), "cpu": "another CPU model"}
    monkeypatch.setattr(refstore, "fingerprint", lambda device: other)
    again = run(cases, tmp_path, kernel="cpp_scale_add_omp")
    assert again.status == PASSED and not again.reference["cached"]
    assert len(entries(store_root)) == 2


def test_eviction_keeps_the_entry_in_use_and_removes_the_oldest(tmp_path):
    store = refstore.ReferenceStore(tmp_path / "refs")
    for key in ("old", "kept"):
        with store.using(key) as entry:
            (entry.inputs_dir / "inputs_1.tf").write_bytes(b"x" * 1000)
            entry.seal({"ok": True})
    with store.using("busy") as busy:
        (busy.inputs_dir / "inputs_1.tf").write_bytes(b"x" * 1000)
        busy.seal({"ok": True})
        removed = store.evict(keep="kept", budget_bytes=0)
    assert removed == ["old"]  # "busy" was in use, "kept" is the caller's
    assert sorted(p.name for p in store.inputs_root.iterdir()) == ["busy", "kept"]


def test_a_machine_failure_is_retried_then_reported_as_a_harness_error(
    cases, tmp_path, store_root, monkeypatch
):
    calls = []

    def flaky(role, process, result, limit):
        calls.append(role)
        if role == "judge" and calls.count("judge") == 1:
            raise infra.InfraFailure("the judge worker was killed by SIGKILL from outside")

    monkeypatch.setattr(evaluation_module, "check_worker", flaky)
    verdict = run(cases, tmp_path)
    assert verdict.status == PASSED and calls.count("judge") == 2  # retried once, then fine

    def always(role, process, result, limit):
        raise infra.InfraFailure(f"the sandbox could not start the {role} worker: unshare: no")

    monkeypatch.setattr(evaluation_module, "check_worker", always)
    with pytest.raises(HarnessError, match="tried 2 times.*not the task or the kernel"):
        run(cases, tmp_path, kernel="cpp_scale_add_omp")


def test_making_room_on_a_short_disk_evicts_only_what_it_must(tmp_path, monkeypatch):
    store = refstore.ReferenceStore(tmp_path / "refs")
    for key in ("oldest", "older", "mine"):
        with store.using(key) as entry:
            (entry.inputs_dir / "inputs_1.tf").write_bytes(b"x" * 100_000)
            entry.seal({"ok": True})

    class Disk:  # 1 MB free, whatever else runs on this machine
        f_bavail, f_frsize = 1000, 1000

    monkeypatch.setattr(refstore.os, "statvfs", lambda path: Disk)
    assert store.make_room("mine", 1_000_000) == []  # enough already
    assert store.make_room("mine", 1_050_000) == ["oldest"]
    assert sorted(p.name for p in store.inputs_root.iterdir()) == ["mine", "older"]


def test_an_evicted_entrys_lock_file_stays_the_one_a_waiting_builder_holds(tmp_path):
    """A builder that opened an entry's lock file before an eviction removed the entry, and
    locks it after, must hold the lock every later opener sees: otherwise a second eviction
    (or build) takes the entry from under it (seen with five KernelBench runs on one GPU box:
    "No such file or directory: .../refs/inputs/KEY" blamed on the task)."""
    import fcntl
    import os

    store = refstore.ReferenceStore(tmp_path / "refs")
    with store.using("a") as entry:
        (entry.inputs_dir / "inputs_1.tf").write_bytes(b"x" * 1000)
        entry.seal({"ok": True})
    with open(store.locks / "a.lock", "a+") as waiting:  # opened before the eviction
        assert store.evict(keep="other", budget_bytes=0) == ["a"]
        fcntl.flock(waiting, fcntl.LOCK_EX)  # locked after it: builds the entry again
        entry.reset()
        (entry.inputs_dir / "inputs_1.tf").write_bytes(b"x" * 1000)
        assert os.fstat(waiting.fileno()).st_ino == os.stat(store.locks / "a.lock").st_ino
        assert store.evict(keep="other", budget_bytes=0) == []  # in use: kept
        assert (entry.inputs_dir / "inputs_1.tf").exists()


def test_an_entry_removed_while_its_reference_is_built_is_built_again(
    cases, tmp_path, store_root, monkeypatch
):
    """Another run's eviction removing the entry under construction is the machine's doing:
    the evaluation is retried, and the task is not blamed."""
    import shutil

    real_check, removed = evaluation_module.check_worker, []

    def evicted_during_prepare(role, process, result, limit):
        if role == "prepare" and not removed:
            removed.append(entries(store_root))
            shutil.rmtree(store_root / "inputs" / removed[0][0])
        return real_check(role, process, result, limit)

    monkeypatch.setattr(evaluation_module, "check_worker", evicted_during_prepare)
    verdict = run(cases, tmp_path)
    assert verdict.status == PASSED, verdict.message
    assert len(removed) == 1 and entries(store_root) == removed[0]  # built again, and sealed
