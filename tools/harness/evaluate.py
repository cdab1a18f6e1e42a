"""The parent side of an evaluation: static checks, then three sandboxed workers.

prepare (reference: validate the task, write inputs) -> candidate (untrusted: run, guard, time)
-> judge (after the candidate's process group is dead: recompute reference outputs, compare,
time the baselines). No candidate code ever runs in this process. Standard library only.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import select
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.dsl import get_adapter
from tools.harness.assemble import assemble, static_verdict
from tools.harness.cache import EvalCache, shared_build_env
from tools.harness.config import EvalConfig, cache_key
from tools.harness.exchange import read_json, work_root, write_json
from tools.harness.extra_shapes import check_extra_shapes
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
    fifo: _FifoClock | None
    started: float


class Evaluation:
    """One evaluation's work directory and workers."""

    def __init__(self, task: TaskSource, kernel: Path, config: EvalConfig) -> None:
        self.task, self.kernel, self.config = task, kernel, config
        self.dir = Path(tempfile.mkdtemp(prefix="kg-eval-", dir=work_root()))
        self.phases: dict[str, float] = {}
        self.pending: list[PendingWorker] = []

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
    ) -> PendingWorker:
        """Start a worker. With `private`, that part of its spec goes through its stdin (never
        a file another worker could read); a worker may then wait there for `go()`."""
        uses_stdin = private is not None
        home = self.dir / role
        home.mkdir(exist_ok=True)
        limit = self._limit()  # the parent's clock restarts at go(); the worker's own does not
        self_limit = limit * (2 if uses_stdin else 1) + 30
        spec = {**spec, "result": str(home / "result.json"), "self_limit_s": self_limit}
        fifo = _FifoClock(home / "clock") if clock else None
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
            limits=Limits(limit, int(self.config.max_rss_gb * 2**30)),
            log_path=home / "log.txt",
            stdin_pipe=uses_stdin,
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
        result = read_json(pending.home / "result.json")
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
    """Verify and profile one candidate. Raises TaskError/UsageError for exit code 2."""
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
        verdict = _run_workers(task, kernel, config, adapter, cache)
        if config.extra_shapes:
            verdict.extra_shapes = check_extra_shapes(
                task, kernel, config, functools.partial(_run_workers, cache=cache), adapter
            )
    verdict.cache_key = key
    verdict.isolation = isolation().describe()
    if not verdict.isolation["secrets_protected"]:
        verdict.warnings.append(verdict.isolation["note"])
    cache.put(key, verdict.to_dict())
    return verdict


def _run_workers(
    task: TaskSource, kernel: Path, config: EvalConfig, adapter, cache: EvalCache
) -> Verdict:
    from tools.harness.reference import verification_seeds

    seeds = verification_seeds(config.seeds)
    ev = Evaluation(task, kernel, config)
    try:
        # The judge starts now (its start-up overlaps prepare and the candidate) but computes
        # nothing until go(), sent once the candidate's process group is dead.
        judge_pending = ev.start(
            "judge",
            {"profile": config.profile, "baseline_compile": config.baseline_compile},
            private=ev.base_spec(),
        )
        # The candidate starts too, importing torch and its DSL, then waits for the inputs.
        cand_pending = ev.start(
            "candidate", _candidate_spec(ev, kernel, config, seeds),
            adapter.child_env(config.device), clock=True, private={},
        )  # fmt: skip
        task_key = task_cache_key(task, config, seeds)
        known = cache.get(task_key)  # a task validated before needs only its inputs written
        prep = ev.worker(
            "prepare",
            {"seeds": seeds, "out_dir": str(ev.dir / "prepare"), "validate": known is None},
            private=ev.base_spec(),
        )
        meta = known or _prepare_meta(prep, task)
        if known is None:
            cache.put(task_key, meta)
        else:
            _prepare_meta(prep, task)  # still raises if writing the inputs failed
        ev.go(cand_pending, {"training": meta.get("training", True)})
        cand = ev.finish(cand_pending)
        judge = None
        report = cand.result or {}
        if report.get("status") == "ok" and report.get("outputs"):
            go = {
                "candidate_dir": str(ev.dir / "candidate"),
                "outputs": report["outputs"],
                "timing_output": report.get("timing_output"),
                "timing_output_seed": report.get("timing_output_seed"),
            }
            ev.go(judge_pending, go)
            judge = ev.finish(judge_pending)
            if judge.result is None or "error" in judge.result or "task_error" in judge.result:
                raise TaskError(_judge_failure(judge))
        verdict = assemble(config, adapter, meta, cand, judge)
        verdict.phases_s = dict(ev.phases)
        return verdict
    finally:
        ev.close()


def _candidate_spec(ev: Evaluation, kernel: Path, config: EvalConfig, seeds: list[int]) -> dict:
    return {
        "device": config.device,
        "precision": config.precision,
        "threads": config.threads,
        "dsl": config.dsl,
        "kernel": str(kernel.resolve()),
        "policy": config.policy,
        "seeds": seeds,
        "inputs_dir": str(ev.dir / "prepare"),
        "out_dir": str(ev.dir / "candidate"),
        "profile": config.profile,
    }


def task_cache_key(task: TaskSource, config: EvalConfig, seeds: list[int]) -> str:
    """What a task's validation depends on: its source and sizes, device, precision, seeds."""
    material = [task.hash, config.device, config.precision, seeds, config.threads]
    return "task-" + hashlib.sha256(json.dumps(material).encode()).hexdigest()[:32]


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
            f"the reference in {task.path} exceeded the memory limit. Shrink it with --set."
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


class _FifoClock(threading.Thread):
    """Timestamps the candidate's phase marks with the parent's own clock."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        os.mkfifo(path, 0o600)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.marks: dict[str, float] = {}
        self._done = threading.Event()
        self.start()

    def run(self) -> None:
        buffer = b""
        while not self._done.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if not ready:
                continue
            chunk = os.read(self.fd, 4096)
            now = time.monotonic()
            if not chunk:
                time.sleep(0.01)
                continue
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                self.marks.setdefault(line.decode(errors="replace")[:32], now)

    def close(self) -> dict[str, float]:
        self._done.set()
        self.join(timeout=1)
        os.close(self.fd)
        return dict(self.marks)
