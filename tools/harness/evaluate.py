"""The parent side of an evaluation: static checks, the task's reference, three sandboxed workers.

prepare (the reference: validate the task, write inputs and reference outputs into the reference
store, once per task and machine) -> candidate (untrusted: run, guard, time; the store's
reference outputs are hidden from it and its inputs read-only) -> judge (after the candidate's
process group is dead: compare with the reference's outputs, time the baselines the store lacks).
No candidate code ever runs in this process. Standard library only.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.dsl import get_adapter
from tools.harness.assemble import assemble, static_verdict
from tools.harness.cache import EvalCache, shared_build_env
from tools.harness.config import EvalConfig, cache_key
from tools.harness.exchange import read_json, work_root, write_json
from tools.harness.extra_shapes import check_extra_shapes
from tools.harness.fifo_clock import FifoClock
from tools.harness.infra import InfraFailure, check_worker, retried
from tools.harness.memory import host_limit_bytes
from tools.harness.reference import pool_seeds, reference_seeds, verification_seeds
from tools.harness.refstore import RefEntry, ReferenceStore, ephemeral_entry, store_key
from tools.harness.sandbox import Limits, ProcessResult, Sandboxed, isolation, scrubbed_env
from tools.harness.static_gate import run_static_checks
from tools.harness.verdict import TaskError, UsageError, Verdict
from tools.task import TaskSource

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class WorkerRun:
    process: ProcessResult
    result: dict | None
    marks: dict[str, float] = field(default_factory=dict)


@dataclass
class PendingWorker:
    role: str
    home: Path
    process: Sandboxed
    fifo: FifoClock | None
    started: float


class Evaluation:
    """One evaluation's work directory and workers."""

    def __init__(self, task: TaskSource, kernel: Path, config: EvalConfig) -> None:
        self.task, self.kernel, self.config = task, kernel, config
        self.dir = Path(tempfile.mkdtemp(prefix="kg-eval-", dir=work_root()))
        self.phases: dict[str, float] = {}
        self.pending: list[PendingWorker] = []
        self.host_limit = host_limit_bytes(config.max_host_gb)
        self.peaks: dict[str, int] = {}  # peak host RSS per worker

    def close(self) -> None:
        for pending in self.pending:  # e.g. a judge left waiting for a candidate that failed
            pending.process.kill()
            pending.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def worker(
        self, role: str, spec: dict, env: dict | None = None, clock=False, private=None
    ) -> WorkerRun:
        return self.finish(self.start(role, spec, env, clock, private))

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
        uses_stdin = private is not None
        home = self.dir / role
        home.mkdir(exist_ok=True)
        limit = self._limit()  # the parent's clock restarts at go(); the worker's own does not
        self_limit = limit * (2 if uses_stdin else 1) + 30
        spec = {**spec, "result": str(home / "result.json"), "self_limit_s": self_limit}
        fifo = FifoClock(home / "clock") if clock else None
        if fifo:
            spec["clock"] = str(fifo.path)
        spec["spawned_at"] = time.time()
        write_json(home / "spec.json", spec)
        threads = self.config.threads or os.cpu_count() or 1
        extra = {
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
            ),
            "OMP_NUM_THREADS": str(threads),
            **shared_build_env(),
            **(env or {}),
        }
        process = Sandboxed(
            [sys.executable, "-m", "tools.harness.worker", role, str(home / "spec.json")],
            cwd=home,
            env=scrubbed_env(extra, home),
            limits=Limits(limit, self.host_limit),
            log_path=home / "log.txt",
            stdin_pipe=uses_stdin,
            hide=hide,
            read_only=read_only,
        )
        if private is not None:
            process.send(json.dumps(private).encode() + b"\n")
        pending = PendingWorker(role, home, process, fifo, process.start)
        self.pending.append(pending)
        return pending

    def go(self, pending: PendingWorker, message: dict) -> None:
        """Let a waiting worker proceed; its time limit and phase time count from here."""
        pending.process.restart_clock()
        pending.started = pending.process.start
        pending.process.send(json.dumps(message).encode() + b"\n", close=True)

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
                return _evaluate(ev, store, entry, adapter)
        finally:
            ev.close()

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
    sandbox = {"hide": (store.expected_root,), "read_only": (store.inputs_root,)} if store else {}
    cand_pending = ev.start(
        "candidate", {**_candidate_spec(ev, seeds), **where}, adapter.child_env(config.device),
        clock=True, private={}, **sandbox,
    )  # fmt: skip
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
        meta = {**_prepare_meta(prep, ev.task), "reference_build_s": round(prep.process.wall_s, 3)}
        entry.seal(meta)
        if store is not None:
            store.evict(entry.key, store.budget_bytes())
    else:
        meta = {**meta, "reference_cached": True}
    ev.go(cand_pending, {"training": meta.get("training", True)})
    cand = ev.finish(cand_pending)
    judge = None
    report = cand.result or {}
    if report.get("status") == "ok" and report.get("outputs"):
        judge = _judge(ev, judge_pending, entry, report, where)
    verdict = assemble(config, adapter, meta, cand, judge)
    verdict.phases_s = dict(ev.phases)
    verdict.memory = _memory(ev, meta, report, judge)
    verdict.reference = {
        "stored": entry.persistent,  # kept in the reference store for later candidates
        "cached": bool(meta.get("reference_cached")),  # built by an earlier evaluation
        "build_s": meta.get("reference_build_s"),
    }
    return verdict


def _judge(ev: Evaluation, pending: PendingWorker, entry: RefEntry, report: dict, where: dict):
    """Let the judge compare, and time only the baselines the store does not have yet."""
    config = ev.config
    wanted = (["eager", "compile"] if config.baseline_compile else ["eager"]) * config.profile
    stored = {name: entry.baselines()[name] for name in wanted if name in entry.baselines()}
    go = {
        "candidate_dir": str(ev.dir / "candidate"),
        "outputs": report["outputs"],
        "timing_output": report.get("timing_output"),
        "timing_output_seed": report.get("timing_output_seed"),
        "baselines": [name for name in wanted if name not in stored],
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


def _candidate_spec(ev: Evaluation, seeds: list[int]) -> dict:
    config = ev.config
    return {
        "device": config.device,
        "precision": config.precision,
        "threads": config.threads,
        "dsl": config.dsl,
        "kernel": str(ev.kernel.resolve()),
        "policy": config.policy,
        "seeds": seeds,
        "out_dir": str(ev.dir / "candidate"),
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
    from tools.harness.config import POLICIES, PRECISIONS

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
