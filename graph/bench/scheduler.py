"""Which jobs a bench still owes, and handing them to its workers.

A job is finished when `results.jsonl` holds a final result for it. On `--resume`, a job whose
run had started is not redone: a run that finished while the bench was down is only read back,
and an unfinished one is resumed (`kernelgraph resume RUN`), so no evaluated candidate is
evaluated again. Each worker (a GPU) takes the next job when its last one ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kernelgraph.graph.bench.executors import WorkerLost
from kernelgraph.graph.bench.job import Job, details
from kernelgraph.graph.bench.memory_gate import MemoryGate
from kernelgraph.state.bench import BenchManifest, SampleResult

FINAL = ("verified", "no_verified_kernel", "task_error", "timeout")  # not run again on resume
RESUMABLE = ("interrupted", "running", "awaiting_approval")  # the run store's statuses
MAX_ATTEMPTS = 3  # a job whose worker died is retried, resuming its run
LOSSES_TO_RETIRE = 2  # a worker lost this many times in a row serves no more jobs


@dataclass
class Plan:
    jobs: list[Job]  # to run (new, or resuming their run)
    recovered: list[SampleResult]  # runs that had finished while the bench was down
    done: int  # jobs with a final result already


def plan(manifest: BenchManifest, folder: Path, db: Path, results: list[SampleResult],
         started: dict[tuple[str, int], str]) -> Plan:  # fmt: skip
    finished = {(r.problem, r.sample) for r in results if r.status in FINAL}
    jobs, recovered = [], []
    for problem in manifest.problems:
        for sample in range(manifest.settings.samples):
            if (problem.name, sample) in finished:
                continue
            job = Job(
                problem=problem.model_dump(),
                sample=sample,
                run_args=manifest.settings.run_args,
                db=str(db),
                folder=str(folder),
                timeout_s=manifest.settings.task_timeout_s,
            )
            run_id = started.get((problem.name, sample))
            status = _run_status(db, run_id) if run_id else None
            if status in FINAL:
                blank = SampleResult(
                    problem=problem.name, sample=sample, status=status, run_id=run_id
                )
                recovered.append(details(blank, run_id, db))
            elif status in RESUMABLE:
                jobs.append(replace(job, resume_run_id=run_id))
            else:
                jobs.append(job)
    return Plan(jobs=jobs, recovered=recovered, done=len(finished))


def _run_status(db: Path, run_id: str) -> str | None:
    from kernelgraph.graph.inspect import live_status
    from kernelgraph.state.store import open_store

    with open_store(db) as store:
        row = store.get_run(run_id)
    return live_status(row) if row else None


class Dispatcher:
    """Hands jobs to workers, one at a time each; `stop()` lets no new job start. A worker lost
    twice in a row retires; its job goes back in the queue for the others. A result
    `retry_run` accepts (a run the machine failed) is resumed, up to MAX_ATTEMPTS in all.
    Workers sharing a GPU (their `group`) take only jobs the `gate` admits there: the first
    queued job that fits beside what already runs on it."""

    def __init__(self, workers: list, on_start: Callable[[Job, str], None],
                 on_result: Callable[[SampleResult], None],
                 started_run: Callable[[Job], str | None],
                 on_lost: Callable[[Job, str], None] = lambda job, why: None,
                 retry_run: Callable[[SampleResult], bool] = lambda result: False,
                 gate: MemoryGate | None = None) -> None:  # fmt: skip
        self.workers, self.on_lost, self.retry_run = workers, on_lost, retry_run
        self.on_start, self.on_result, self.started_run = on_start, on_result, started_run
        self.gate = gate or MemoryGate({})
        self.todo: list[tuple[Job, int]] = []  # queued, in order; guarded by `lock`
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.open_jobs = 0  # queued or running
        self.serving = 0  # workers not retired

    def run(self, jobs: list[Job]) -> None:
        self.open_jobs, self.serving = len(jobs), len(self.workers)
        self.todo = [(job, 1) for job in jobs]
        threads = [
            threading.Thread(target=self._serve, args=(w,), daemon=True) for w in self.workers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():  # a timed join lets Ctrl-C reach the main thread
                thread.join(timeout=0.5)
        self._give_up_on_the_rest()

    def stop(self) -> None:
        self.stopping.set()

    def _serve(self, worker) -> None:
        losses, group = 0, getattr(worker, "group", None)
        while not self.stopping.is_set() and losses < LOSSES_TO_RETIRE:
            with self.lock:
                if self.open_jobs == 0:
                    break
                taken = self._take(group)
            if taken is None:
                time.sleep(0.2)  # nothing that fits yet; a job may still come back
                continue
            job, attempt = taken
            self.on_start(job, worker.name)
            try:
                result = worker.run(job)
            except WorkerLost as exc:
                losses += 1
                self.on_lost(job, str(exc))
                self._retry(job, attempt, str(exc))
                continue
            finally:
                with self.lock:
                    self.gate.release(group, job.peak_bytes)
            losses = 0
            if self.retry_run(result) and attempt < MAX_ATTEMPTS and not self.stopping.is_set():
                self._put(replace(job, resume_run_id=result.run_id), attempt + 1)
                continue
            self._finish(result)
        with self.lock:
            self.serving -= 1

    def _take(self, group: str | None) -> tuple[Job, int] | None:
        for index, (job, _) in enumerate(self.todo):
            if self.gate.admit(group, job.peak_bytes):
                return self.todo.pop(index)
        return None

    def _put(self, job: Job, attempt: int) -> None:
        with self.lock:
            self.todo.append((job, attempt))

    def _finish(self, result: SampleResult) -> None:
        with self.lock:
            self.open_jobs -= 1
        if not (self.stopping.is_set() and result.status == "interrupted"):
            self.on_result(result)  # an interrupted run of a stopping bench is resumed later

    def _retry(self, job: Job, attempt: int, why: str) -> None:
        if attempt >= MAX_ATTEMPTS:
            self._finish(_crashed(job, f"its worker was lost {attempt} times ({why})"))
            return
        run_id = self.started_run(job) or job.resume_run_id
        self._put(replace(job, resume_run_id=run_id), attempt + 1)

    def _give_up_on_the_rest(self) -> None:
        """Every worker retired with jobs left: they end as crashed, named, not silently."""
        if self.stopping.is_set():
            return
        with self.lock:
            left, self.todo = self.todo, []
        for job, _ in left:
            self._finish(_crashed(job, "no worker was left to run it (every worker was lost)"))


def _crashed(job: Job, why: str) -> SampleResult:
    return SampleResult(
        problem=job.problem["name"], sample=job.sample, status="crashed", message=why
    )
