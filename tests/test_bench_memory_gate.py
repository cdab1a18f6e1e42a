"""Several runs per GPU (`bench --jobs N`): admission by estimated device-memory peak, the
estimate itself (a real child process running tasks on meta tensors), and the workers made."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kernelgraph.graph.bench import executors
from kernelgraph.graph.bench.executors import ExecutorOptions, LocalExecutor
from kernelgraph.graph.bench.job import Job
from kernelgraph.graph.bench.memory_gate import (
    USABLE_SHARE,
    MemoryGate,
    estimate_peaks,
    gated,
)
from kernelgraph.graph.bench.scheduler import Dispatcher
from kernelgraph.state.bench import SampleResult

GiB = 1 << 30


def test_small_runs_share_a_gpu_a_big_one_waits_and_an_unknown_one_runs_alone() -> None:
    gate = MemoryGate({"0": 100 * GiB})  # 90 GiB usable
    assert gate.admit("0", 1 * GiB) and gate.admit("0", 1 * GiB)
    assert gate.admit("0", 50 * GiB)
    assert not gate.admit("0", 40 * GiB)  # 3 + 52 + 42 > 90
    gate.release("0", 50 * GiB)
    assert gate.admit("0", 40 * GiB)
    assert not gate.admit("0", None)  # unknown: only on an idle GPU
    for peak in (1 * GiB, 1 * GiB, 40 * GiB):
        gate.release("0", peak)
    assert gate.admit("0", None)
    assert not gate.admit("0", 0)  # nothing beside it
    assert gate.admit("other", None)  # a worker of no shared GPU is never held back


def test_a_job_bigger_than_the_gpu_still_runs_when_the_gpu_is_idle() -> None:
    gate = MemoryGate({"0": 10 * GiB})
    assert gate.admit("0", 500 * GiB)  # the harness's own preflight tells the user
    assert gate.held["0"] == int(USABLE_SHARE * 10 * GiB)


def sized_job(name: str, peak_bytes: int | None) -> Job:
    return Job(problem={"name": name, "path": name}, sample=0, run_args=[], db="d", folder="f",
               peak_bytes=peak_bytes)  # fmt: skip


class TimedWorker:
    """Holds each job for a moment, as a run would, and records what ran beside it."""

    def __init__(self, name: str, group: str, running: dict, lock: threading.Lock) -> None:
        self.name, self.group, self.running, self.lock = name, group, running, lock
        self.peaks_seen: list[int] = []

    def run(self, job: Job) -> SampleResult:
        with self.lock:
            self.running[job.key] = job.peak_bytes
            self.peaks_seen.append(sum(self.running.values()))
        time.sleep(0.02)  # the run's duration, so that runs overlap
        with self.lock:
            del self.running[job.key]
        return SampleResult(problem=job.problem["name"], status="verified", worker=self.name)


def test_a_gpus_runs_never_exceed_its_memory_together_and_every_job_runs_once() -> None:
    running, lock = {}, threading.Lock()
    workers = [TimedWorker(f"gpu0.{k}", "0", running, lock) for k in range(4)]
    peaks = [30 * GiB, 30 * GiB, 30 * GiB] + [1 * GiB] * 9
    todo = [sized_job(f"p{i}", peak) for i, peak in enumerate(peaks)]
    results = []
    gate = MemoryGate({"0": 80 * GiB})  # 72 GiB usable: two of the big ones at most
    Dispatcher(workers, lambda j, w: None, results.append, lambda j: None, gate=gate).run(todo)
    assert sorted(r.problem for r in results) == sorted(f"p{i}" for i in range(12))
    seen = max(p for w in workers for p in w.peaks_seen)
    assert seen <= gate.capacity["0"] < 90 * GiB  # never all three big ones at once
    assert gate.held["0"] == 0 and gate.running["0"] == 0


def test_a_gpus_workers_take_the_first_queued_job_that_fits_beside_its_runs() -> None:
    peaks = {"big0": 30 * GiB, "big1": 30 * GiB, "big2": 30 * GiB, "small": 1 * GiB}
    todo = [sized_job(name, peak) for name, peak in peaks.items()]
    dispatcher = Dispatcher([], lambda j, w: None, lambda r: None, lambda j: None,
                            gate=MemoryGate({"0": 80 * GiB, "1": 80 * GiB}))  # fmt: skip
    dispatcher.todo = [(job, 1) for job in todo]
    taken = [dispatcher._take("0") for _ in range(3)]  # three workers of GPU 0 ask in turn
    assert [t[0].problem["name"] for t in taken] == ["big0", "big1", "small"]
    assert dispatcher._take("0") is None  # big2 waits for one of the big ones
    assert dispatcher._take("1")[0].problem["name"] == "big2"  # another GPU takes it


TASK = """
import torch
N = 16
class Model(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.linear = torch.nn.Linear(k, n)
    def forward(self, x):
        return self.linear(x)
def get_inputs():
    return [torch.randn(N, 64)]
def get_init_inputs():
    return [64, 32]
"""


def test_peaks_are_estimated_on_meta_tensors_in_a_child_and_a_broken_task_is_unknown(
    tmp_path: Path,
) -> None:
    good, broken = tmp_path / "linear.py", tmp_path / "broken.py"
    good.write_text(TASK)
    broken.write_text("raise RuntimeError('no')\n")
    params = (64 * 32 + 32) * 4
    peaks = estimate_peaks([str(good), str(broken)], ["N=1024"])
    assert peaks == {str(good): params + 3 * 1024 * 64 * 4 + 3 * 1024 * 32 * 4, str(broken): None}


def test_gated_jobs_are_queued_biggest_first_with_unknown_ones_first(tmp_path: Path) -> None:
    small, big, broken = (tmp_path / f"{n}.py" for n in ("small", "big", "broken"))
    small.write_text(TASK)
    big.write_text(TASK.replace("N = 16", "N = 100000"))
    broken.write_text("raise RuntimeError('no')\n")
    todo = [
        Job(problem={"name": p.stem, "path": str(p)}, sample=0, run_args=[], db="d", folder="f")
        for p in (small, big, broken)
    ]
    gate = gated(todo, {"0": 80 * GiB}, ["--dsl", "triton"])
    assert [j.problem["name"] for j in todo] == ["broken", "big", "small"]
    assert todo[1].peak_bytes > todo[2].peak_bytes > 0 and todo[0].peak_bytes is None
    assert gate.capacity == {"0": int(USABLE_SHARE * 80 * GiB)}
    assert gated(todo, {}, []).capacity == {}  # no shared GPU: no gate, no sizing


@pytest.mark.parametrize("jobs, names", [(1, ["gpu0", "gpu1"]),
                                          (2, ["gpu0.0", "gpu0.1", "gpu1.0", "gpu1.1"])])  # fmt: skip
def test_jobs_workers_per_gpu_share_its_memory_budget(monkeypatch, jobs, names) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(executors, "gpu_memory_bytes", lambda: {"0": 80 * GiB, "1": 80 * GiB})
    executor = LocalExecutor(ExecutorOptions("cuda", jobs=jobs))
    workers = executor.workers()
    assert [w.name for w in workers] == names
    assert {w.env["CUDA_VISIBLE_DEVICES"] for w in workers} == {"0", "1"}
    shared = executor.capacities(workers)
    assert shared == ({} if jobs == 1 else {"0": 80 * GiB, "1": 80 * GiB})


def test_a_task_that_hangs_while_sized_is_left_unknown(tmp_path: Path, monkeypatch) -> None:
    from kernelgraph.tools.harness import sizes

    hangs = tmp_path / "hangs.py"
    hangs.write_text(
        TASK.replace("def get_inputs():", "def get_inputs():\n    while True:\n        pass")
    )
    monkeypatch.setattr(sizes, "PER_TASK_S", 1)
    assert sizes.peak_bytes(str(hangs), {}) is None
    monkeypatch.setattr(sizes, "PER_TASK_S", 60)
    good = tmp_path / "good.py"
    good.write_text(TASK)
    assert sizes.peak_bytes(str(good), {}) > 0  # the alarm is cleared for the next task
