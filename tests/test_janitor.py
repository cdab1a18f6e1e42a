"""An evaluation's folders are removed in the background, and the next candidate runs only
once every removal is done (freeing gigabytes of shared memory must not overlap a timing)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

from kernelgraph.tools.harness import evaluate as evaluate_module
from kernelgraph.tools.harness import evaluation as evaluation_module
from kernelgraph.tools.harness import janitor
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig


def test_removal_runs_in_the_background_and_wait_finishes_it(tmp_path):
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        (folder / "deep").mkdir(parents=True)
        (folder / "deep" / "outputs_1.tf.p0").write_bytes(b"\0" * 4096)
    cleaner = janitor.Janitor()
    cleaner.remove(folders)
    cleaner.wait()
    assert not any(folder.exists() for folder in folders)


def test_the_next_candidate_runs_only_after_earlier_removals(cases, tmp_path, monkeypatch):
    earlier = tmp_path / "earlier_evaluation"
    earlier.mkdir()
    (earlier / "outputs_1.tf").write_bytes(b"\0" * 4096)
    gate = threading.Event()  # holds the removal until someone waits for it
    real_remove_all = janitor._remove_all

    def gated_remove_all(folders):
        gate.wait()
        real_remove_all(folders)

    monkeypatch.setattr(janitor, "_remove_all", gated_remove_all)
    cleaner = janitor.Janitor()
    real_wait = cleaner.wait

    def opening_wait():
        gate.set()
        return real_wait()

    monkeypatch.setattr(cleaner, "wait", opening_wait)
    monkeypatch.setattr(evaluate_module, "JANITOR", cleaner)  # waited for before the candidate
    monkeypatch.setattr(evaluation_module, "JANITOR", cleaner)  # each evaluation's close
    cleaner.remove([earlier])  # as if the previous evaluation had just closed

    seen, own = [], []
    go = evaluate_module.Evaluation.go

    def spying_go(self, pending, message):
        if pending.role == "candidate":
            seen.append(earlier.exists())
            own.extend(self.folders)
        return go(self, pending, message)

    monkeypatch.setattr(evaluate_module.Evaluation, "go", spying_go)
    config = EvalConfig(dsl="cpp", device="cpu", seeds=1, profile=False)
    verdict = evaluate_module.evaluate(
        cases / "tasks" / "scale_add.py", cases / "kernels" / "cpp_scale_add.py", config,
        EvalCache(tmp_path / "evals"),
    )  # fmt: skip
    gate.set()
    assert verdict.passed, verdict.message
    assert seen == [False]  # the earlier folder was gone before the candidate could run
    cleaner.wait()
    assert own and not any(folder.exists() for folder in own)  # its own folders went too


def test_folders_of_dead_processes_of_this_host_are_swept(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGRAPH_WORK_DIR", str(tmp_path))
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # its pid now names no process
    host = socket.gethostname()
    folders = {
        "dead": tmp_path / f"kg-eval-{finished.pid}@{host}-abcd1234",
        "alive": tmp_path / f"kg-warm-{os.getpid()}@{host}-abcd1234",
        "other host": tmp_path / f"kg-eval-{finished.pid}@not-{host}-abcd1234",
        "not ours": tmp_path / "kg-eval-results",
    }
    for folder in folders.values():
        folder.mkdir()
        (folder / "outputs_1.tf.p0").write_bytes(b"\0" * 4096)
    cleaner = janitor.Janitor()
    monkeypatch.setattr(janitor, "JANITOR", cleaner)
    janitor.sweep_left_behind.cache_clear()
    try:
        assert janitor.sweep_left_behind() == 1
        cleaner.wait()
    finally:
        janitor.sweep_left_behind.cache_clear()
    assert [name for name, folder in folders.items() if not folder.exists()] == ["dead"]


def test_an_evaluation_folder_names_its_owner(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGRAPH_WORK_DIR", str(tmp_path))
    folder = janitor.owned_folder("kg-eval-")
    found = janitor.LEFT_BEHIND.match(folder.name)
    assert found and int(found.group(1)) == os.getpid()
    assert found.group(2) == socket.gethostname()
