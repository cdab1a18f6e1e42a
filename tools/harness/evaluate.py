"""The parent side of an evaluation: static checks, the task's reference, three sandboxed workers.

prepare (the reference: validate the task, write inputs and reference outputs into the reference
store, once per task and machine) -> candidate (untrusted: run, guard, time; the store's
reference outputs are hidden from it and its inputs read-only) -> judge (after the candidate's
process group is dead: compare with the reference's outputs, time the baselines the store lacks).
No candidate code ever runs in this process. Standard library only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from pathlib import Path

from kernelgraph.tools.dsl import get_adapter
from kernelgraph.tools.harness.assemble import assemble, static_verdict
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig, cache_key
from kernelgraph.tools.harness.exchange import read_json
from kernelgraph.tools.harness.extra_shapes import check_extra_shapes
from kernelgraph.tools.harness.infra import InfraFailure, check_worker, retried
from kernelgraph.tools.harness.janitor import JANITOR, owned_folder
from kernelgraph.tools.harness.memory import host_limit_bytes
from kernelgraph.tools.harness.reference import pool_seeds, reference_seeds, verification_seeds
from kernelgraph.tools.harness.refstore import RefEntry, ReferenceStore, ephemeral_entry, store_key
from kernelgraph.tools.harness.sandbox import isolation
from kernelgraph.tools.harness.static_gate import run_static_checks
from kernelgraph.tools.harness.verdict import TaskError, UsageError, Verdict
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
        setup = _candidate_setup(self.config)
        return spawn_worker(folder / "candidate", "candidate", setup, settings, True, stdin=True)

    def _warm_key(self, settings: WorkerSettings) -> tuple:
        """Settings a warm worker must share; its host limit is the fraction of the memory
        available when it started (that figure moves between evaluations)."""
        settings = dataclasses.replace(settings, host_limit=0)
        setup = tuple(sorted(_candidate_setup(self.config).items()))
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
        self.peaks[role] = process.peak_rss_bytes
        result = read_json(pending.home / "result.json")
        check_worker(role, process, result, self.host_limit)
        for stage, seconds in ((result or {}).get("stages_s") or {}).items():
            if isinstance(seconds, int | float):  # the candidate's figures are its own claim
                self.phases[f"{role}.{stage}"] = seconds
        return WorkerRun(process, result, marks)

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


def evaluate(
    task_path: str | Path,
    kernel_path: str | Path,
    config: EvalConfig,
    cache: EvalCache | None = None,
    use_cache: bool = True,
) -> Verdict:
    """Verify and profile one candidate. Raises TaskError/UsageError (exit code 2) and
    HarnessError (the machine failed twice)."""
    task = TaskSource.read(task_path, config.sets)
    kernel = Path(kernel_path)
    code = _read_kernel(kernel)
    adapter = _check_config(config)
    key = cache_key(code, task.hash, config)
    cache = cache or EvalCache()
    if use_cache and (hit := cache.get(key)):
        verdict = Verdict.from_dict(hit)
        verdict.cached = True
        return verdict

    static = run_static_checks(code, adapter, config)
    if static is not None:
        verdict = static_verdict(static, config)
    else:
        run = functools.partial(_run_workers, use_cache=use_cache)
        verdict = run(task, kernel, config, adapter)
        if config.extra_shapes:
            verdict.extra_shapes = check_extra_shapes(task, kernel, config, run, adapter)
    verdict.cache_key = key
    verdict.isolation = isolation().describe()
    if not verdict.isolation["secrets_protected"]:
        verdict.warnings.append(verdict.isolation["note"])
    cache.put(key, verdict.to_dict())
    return verdict


def _run_workers(
    task: TaskSource, kernel: Path, config: EvalConfig, adapter, use_cache: bool = True
) -> Verdict:
    """One evaluation, tried again when the machine (not the task or kernel) failed it."""

    def attempt() -> Verdict:
        ev = Evaluation(task, kernel, config)
        try:
            with _reference(ev, config, use_cache) as (store, entry):
                verdict = _evaluate(ev, store, entry, adapter)
        finally:
            closing = time.monotonic()
            ev.close()
        verdict.phases_s["parent.close"] = round(time.monotonic() - closing, 3)
        return verdict

    return retried(attempt)


@contextlib.contextmanager
def _reference(ev: Evaluation, config: EvalConfig, use_cache: bool):
    """The task's reference store entry, or inputs for this evaluation alone where the store
    cannot be used (asked not to, or the sandbox cannot hide its reference outputs)."""
    if not (use_cache and isolation().hides_paths):
        yield None, ephemeral_entry(ev.dir)
        return
    store = ReferenceStore()
    seeds = reference_seeds(verification_seeds(config.seeds))
    with store.using(store_key(ev.task.hash, config, seeds)) as entry:
        yield store, entry


def _evaluate(ev: Evaluation, store: ReferenceStore | None, entry: RefEntry, adapter) -> Verdict:
    config = ev.config
    seeds = verification_seeds(config.seeds)
    where = {
        "inputs_dir": str(entry.inputs_dir),
        "expected_dir": str(entry.expected_dir) if entry.expected_dir else None,
        "pool_seeds": pool_seeds(seeds),
    }
    # The judge and the candidate start now, so their start-ups overlap the reference's build;
    # each waits on its stdin until the parent lets it go.
    judge_pending = ev.start("judge", {}, private=ev.base_spec())
    hidden = {"hide": (store.expected_root,), "read_only": (store.inputs_root,)} if store else {}
    settings = ev.settings(adapter.child_env(config.device), **hidden)
    cand_pending = ev.start_candidate({**_candidate_spec(ev, seeds), **where}, settings)
    meta = entry.meta()
    if meta is None:
        try:
            prep = ev.worker(
                "prepare",
                {"seeds": reference_seeds(seeds), "validate": True, **where},
                private=ev.base_spec(),
            )
        except InfraFailure as exc:
            if store is not None and exc.disk_bytes:
                store.make_room(entry.key, exc.disk_bytes)  # the retry finds the room
            raise
        if not entry.inputs_dir.is_dir():
            raise InfraFailure("the reference store's entry was removed while it was being built")
        meta = {**_prepare_meta(prep, ev.task), "reference_build_s": round(prep.process.wall_s, 3)}
        entry.seal(meta)
        if store is not None:
            store.evict(entry.key, store.budget_bytes())
    else:
        meta = {**meta, "reference_cached": True}
    ev.phases["parent.waiting_for_cleanup"] = round(JANITOR.wait(), 3)  # nothing freed while timed
    ev.phases["parent.before_go"] = round(time.monotonic() - ev.created, 3)
    where["updated_buffers"] = meta.get("updated_buffers", [])  # for the judge's go, too
    ev.go(
        cand_pending,
        {"training": meta.get("training", True), "updated_buffers": where["updated_buffers"]},
    )
    cand = ev.finish(cand_pending)
    candidate_done = time.monotonic()
    baselines = _baselines_to_time(config, entry)
    if not baselines:  # nothing is timed from here on: the next worker may start up beside it
        ev.start_next_candidate(settings)
    judge = None
    report = cand.result or {}
    if report.get("status") == "ok" and report.get("outputs"):
        judge = _judge(ev, judge_pending, entry, report, where, cand_pending.home, baselines)
        ev.phases["parent.candidate_to_judge"] = round(judge_pending.started - candidate_done, 3)
    if baselines:
        ev.start_next_candidate(settings)
    verdict = assemble(config, adapter, meta, cand, judge)
    verdict.phases_s = dict(ev.phases)
    verdict.memory = _memory(ev, meta, report, judge)
    verdict.reference = {
        "stored": entry.persistent,  # kept in the reference store for later candidates
        "cached": bool(meta.get("reference_cached")),  # built by an earlier evaluation
        "build_s": meta.get("reference_build_s"),
    }
    return verdict


def _wanted_baselines(config: EvalConfig) -> list[str]:
    return (["eager", "compile"] if config.baseline_compile else ["eager"]) * config.profile


def _baselines_to_time(config: EvalConfig, entry: RefEntry) -> list[str]:
    """The baselines this evaluation's judge must time: those the store does not have yet."""
    return [name for name in _wanted_baselines(config) if name not in entry.baselines()]


def _judge(ev: Evaluation, pending: PendingWorker, entry: RefEntry, report: dict, where: dict,
           candidate_dir: Path, baselines: list[str]):  # fmt: skip
    """Let the judge compare, and time only the `baselines` the store does not have yet."""
    wanted = _wanted_baselines(ev.config)
    stored = {name: entry.baselines()[name] for name in wanted if name not in baselines}
    go = {
        "candidate_dir": str(candidate_dir),
        "outputs": report["outputs"],
        "timing_output": report.get("timing_output"),
        "timing_output_seed": report.get("timing_output_seed"),
        "buffers": report.get("buffers", {}),
        "baselines": baselines,
        **where,
    }
    ev.go(pending, go)
    judge = ev.finish(pending)
    result = judge.result
    if result is None or "error" in result or "task_error" in result:
        raise TaskError(_judge_failure(judge))
    measured = {name: result[name] for name in go["baselines"] if name in result}
    if measured:
        entry.add_baselines({**measured, "peaks": result.get("peaks")})
    if stored:
        result.update(stored, baseline_cached=True)
        result.setdefault("peaks", entry.baselines().get("peaks"))
    return judge


def _memory(ev: Evaluation, meta: dict, report: dict, judge) -> dict:
    """Peak host memory per worker (measured by the parent) and peak device memory."""
    return {
        "host_limit_bytes": ev.host_limit,
        "peak_host_bytes": dict(ev.peaks),
        "peak_device_bytes": {
            "reference": meta.get("peak_device_bytes"),
            "candidate": report.get("peak_device_bytes"),  # the candidate's own claim
            "judge": (judge.result or {}).get("peak_device_bytes") if judge else None,
        },
    }


def _candidate_setup(config: EvalConfig) -> dict:
    """What a candidate worker needs before it knows its evaluation (it may start ahead)."""
    return {
        "device": config.device,
        "precision": config.precision,
        "threads": config.threads,
        "dsl": config.dsl,
    }


def _candidate_spec(ev: Evaluation, seeds: list[int]) -> dict:
    """This evaluation's part of the candidate's spec, sent through its stdin."""
    config = ev.config
    return {
        "kernel": str(ev.kernel.resolve()),
        "policy": config.policy,
        "seeds": seeds,
        "profile": config.profile,
        "share_weights": config.share_weights,
    }


def _prepare_meta(prep: WorkerRun, task: TaskSource) -> dict:
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
            f"the reference in {task.path} exceeded the host-memory limit (peak "
            f"{prep.process.peak_rss_bytes / 2**30:.1f} GiB). Shrink it with --set, or raise "
            f"--max-host-memory."
        )
    if not result.get("ok"):
        detail = result.get("error") or prep.process.log_tail[-1500:]
        raise TaskError(f"the reference in {task.path} could not be run: {detail}")
    return result["meta"]


def _judge_failure(judge: WorkerRun) -> str:
    result = judge.result or {}
    return result.get("task_error") or (
        "the judge process failed, which is a kernelgraph or task problem, not the "
        f"candidate's: {result.get('error') or judge.process.log_tail[-1500:]}"
    )


def _read_kernel(kernel: Path) -> str:
    try:
        return kernel.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read kernel file {kernel}: {exc.strerror or exc}") from exc


def _check_config(config: EvalConfig):
    from kernelgraph.tools.harness.config import POLICIES, PRECISIONS

    try:
        adapter = get_adapter(config.dsl)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from exc
    if config.device not in adapter.devices:
        raise UsageError(
            f"--dsl {config.dsl} runs on {', '.join(adapter.devices)}, not on {config.device}."
        )
    if config.precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}")
    if config.policy not in POLICIES:
        raise UsageError(f"--policy must be one of {', '.join(POLICIES)}")
    if config.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    return adapter
