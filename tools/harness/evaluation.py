"""One evaluation's work directory and its sandboxed workers (start, let go, finish), and what
the parent reads back from them. Standard library only; no candidate code runs here."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.exchange import read_json
from kernelgraph.tools.harness.infra import check_worker
from kernelgraph.tools.harness.janitor import JANITOR, owned_folder
from kernelgraph.tools.harness.memory import host_limit_bytes, over_host_limit
from kernelgraph.tools.harness.verdict import TaskError, UsageError
from kernelgraph.tools.harness.warm import WARM_POOL
from kernelgraph.tools.harness.workers import (
    PendingWorker,
    WorkerRun,
    WorkerSettings,
    send,
    spawn_worker,
)
from kernelgraph.tools.task import TaskSource


class Evaluation:
    """One evaluation's work directory and workers."""

    def __init__(self, task: TaskSource, kernel: Path, config: EvalConfig) -> None:
        self.task, self.kernel, self.config = task, kernel, config
        self.dir = owned_folder("kg-eval-")
        self.folders = [self.dir]  # removed at close: a warm worker's folder joins them
        self.phases: dict[str, float] = {}
        self.pending: list[PendingWorker] = []
        self.host_limit = host_limit_bytes(config.max_host_gb)
        self.peaks: dict[str, int] = {}  # peak host RSS per worker
        self.created = time.monotonic()

    def close(self) -> None:
        for pending in self.pending:  # e.g. a judge left waiting for a candidate that failed
            pending.process.kill()
            pending.process.wait()
        JANITOR.remove(self.folders)

    def worker(
        self, role: str, spec: dict, env: dict | None = None, clock=False, private=None
    ) -> WorkerRun:
        return self.finish(self.start(role, spec, env, clock, private))

    def settings(self, env: dict | None = None, hide=(), read_only=()) -> WorkerSettings:
        threads = self.config.threads or os.cpu_count() or 1
        env_items = tuple(sorted((env or {}).items()))
        return WorkerSettings(
            self._limit(), self.host_limit, threads, env_items, tuple(hide), tuple(read_only)
        )

    def start(
        self,
        role: str,
        spec: dict,
        env: dict | None = None,
        clock=False,
        private: dict | None = None,
        hide: tuple[Path, ...] = (),
        read_only: tuple[Path, ...] = (),
    ) -> PendingWorker:
        """Start a worker. With `private`, that part of its spec goes through its stdin (never
        a file another worker could read); a worker may then wait there for `go()`."""
        settings = self.settings(env, hide, read_only)
        pending = spawn_worker(self.dir / role, role, spec, settings, clock, private)
        self.pending.append(pending)
        return pending

    def start_candidate(self, message: dict, settings: WorkerSettings) -> PendingWorker:
        """The candidate worker: one started ahead for these settings (see `warm`), else a new
        one. Either way it learns this evaluation (kernel, seeds, folders) from `message`."""
        warm = WARM_POOL.take(self._warm_key(settings), max_age_s=settings.limit_s)
        if warm is None:
            pending = self._spawn_candidate(self.dir, settings)
        else:
            pending = warm.worker
            self.folders.append(warm.folder)
            self.phases["candidate.started_ahead_s"] = round(warm.age_s(), 3)
        send(pending.process, {**message, "out_dir": str(pending.home)})
        self.pending.append(pending)
        return pending

    def start_next_candidate(self, settings: WorkerSettings) -> None:
        """Start the worker for the next evaluation with these settings (if the pool is on)."""
        WARM_POOL.refill(
            self._warm_key(settings), lambda folder: self._spawn_candidate(folder, settings)
        )

    def _spawn_candidate(self, folder: Path, settings: WorkerSettings) -> PendingWorker:
        setup = candidate_setup(self.config)
        return spawn_worker(folder / "candidate", "candidate", setup, settings, True, stdin=True)

    def _warm_key(self, settings: WorkerSettings) -> tuple:
        """Settings a warm worker must share; its host limit is the fraction of the memory
        available when it started (that figure moves between evaluations)."""
        settings = dataclasses.replace(settings, host_limit=0)
        setup = tuple(sorted(candidate_setup(self.config).items()))
        return settings, self.config.max_host_gb, setup

    def go(self, pending: PendingWorker, message: dict) -> None:
        """Let a waiting worker proceed; its time limit and phase time count from here."""
        pending.process.restart_clock()
        pending.started = pending.process.start
        send(pending.process, message, close=True)

    def finish(self, pending: PendingWorker) -> WorkerRun:
        process = pending.process.wait()
        self.pending.remove(pending)
        role = pending.role
        self.phases[role] = round(time.monotonic() - pending.started, 3)
        marks = pending.fifo.close() if pending.fifo else {}
        stalls = pending.fifo.cpu_stalls if pending.fifo else {}
        self.peaks[role] = process.peak_rss_bytes
        result = read_json(pending.home / "result.json")
        check_worker(role, process, result, self.host_limit)
        for stage, seconds in ((result or {}).get("stages_s") or {}).items():
            if isinstance(seconds, int | float):  # the candidate's figures are its own claim
                self.phases[f"{role}.{stage}"] = seconds
        return WorkerRun(process, result, marks, stalls)

    def _limit(self) -> float:
        return self.config.timeout_s

    def base_spec(self) -> dict:
        c = self.config
        return {
            "task": str(self.task.path.resolve()),
            "source": self.task.source,
            "sets": self.task.sets,
            "device": c.device,
            "precision": c.precision,
            "threads": c.threads,
        }


def candidate_setup(config: EvalConfig) -> dict:
    """What a candidate worker needs before it knows its evaluation (it may start ahead)."""
    return {
        "device": config.device,
        "precision": config.precision,
        "threads": config.threads,
        "dsl": config.dsl,
    }


def prepare_meta(prep: WorkerRun, task: TaskSource) -> dict:
    result = prep.result or {}
    if "task_error" in result:
        raise TaskError(result["task_error"])
    if prep.process.timed_out:
        raise TaskError(
            f"the reference in {task.path} did not finish within the time limit "
            f"({prep.process.wall_s:.0f} s). Shrink it with --set or raise --timeout."
        )
    if prep.process.rss_exceeded:
        raise TaskError(
            f"the reference in {task.path} exceeded the host-memory limit "
            f"({over_host_limit(prep.process.peak_rss_bytes, prep.process.rss_limit_bytes)}). "
            f"Shrink it with --set, or raise --max-host-memory."
        )
    if not result.get("ok"):
        detail = result.get("error") or prep.process.log_tail[-1500:]
        raise TaskError(f"the reference in {task.path} could not be run: {detail}")
    return result["meta"]


def read_kernel(kernel: Path) -> str:
    try:
        return kernel.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read kernel file {kernel}: {exc.strerror or exc}") from exc
