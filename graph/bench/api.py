"""`kernelgraph bench` as plain functions: start a bench over a suite, resume one, and read a
finished one back. Every problem is an ordinary run in the run store (`runs`, `show`, `resume`
and `export` work on it); the bench folder keeps what ties them together."""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from kernelgraph import IMPORT_ROOT
from kernelgraph.graph.bench import folder as bench_folder
from kernelgraph.graph.bench.executors import ExecutorOptions, make_executor
from kernelgraph.graph.bench.job import Job, stop_live_runs
from kernelgraph.graph.bench.memory_gate import MemoryGate, gated
from kernelgraph.graph.bench.metrics import latest, summarize
from kernelgraph.graph.bench.progress import BenchProgress
from kernelgraph.graph.bench.report import write_report
from kernelgraph.graph.bench.scheduler import Dispatcher, plan
from kernelgraph.graph.bench.store_note import reference_store_note
from kernelgraph.graph.bench.suite import discover
from kernelgraph.graph.runner import validate_settings
from kernelgraph.state.bench import (
    BenchEnvironment,
    BenchManifest,
    BenchSettings,
    BenchSummary,
    SampleResult,
)
from kernelgraph.state.config import RunConfig
from kernelgraph.state.store import default_path
from kernelgraph.tools.harness.verdict import UsageError


@dataclass
class BenchOutcome:
    folder: Path
    manifest: BenchManifest
    results: list[SampleResult]  # the last result of each (problem, sample)
    summary: BenchSummary
    reports: tuple[Path, Path] | None = None
    interrupted: bool = False
    elapsed_s: float = 0.0
    ran: int = 0  # jobs this invocation ran to a result
    skipped: int = 0  # jobs already finished by an earlier invocation
    notes: list[str] = field(default_factory=list)


def start_bench(settings: BenchSettings, out: Path | None, executor: ExecutorOptions,
                db: Path | None = None, progress: BenchProgress | None = None) -> BenchOutcome:  # fmt: skip
    """A new bench: the suite's problems, run as `settings` says, into folder `out`."""
    problems = discover(Path(settings.suite), settings.only)
    check = RunConfig(task_path=problems[0].path, dsl=settings.dsl, device=settings.device,
                      precision=settings.precision, policy=settings.policy)  # fmt: skip
    validate_settings(check, device_here=not executor.ray_address)
    out = out or default_folder(settings.suite)
    if (out / bench_folder.MANIFEST).exists():
        raise UsageError(
            f"{out} already holds a bench: continue it with kernelgraph bench --resume {out}, "
            f"or pick another --out."
        )
    manifest = BenchManifest(
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        settings=settings,
        problems=problems,
        db=str(Path(db or default_path()).resolve()),
    )
    bench_folder.write_manifest(out, manifest)
    return _drive(out, manifest, executor, progress)


def resume_bench(folder: Path, executor: ExecutorOptions,
                 progress: BenchProgress | None = None) -> BenchOutcome:  # fmt: skip
    """Go on with a bench after a kill: finished problems are skipped, started runs resumed."""
    return _drive(Path(folder), bench_folder.read_manifest(folder), executor, progress)


def load_bench(folder: Path) -> BenchOutcome:
    """A bench as it stands on disk (finished or not), with its summary; runs nothing."""
    manifest = bench_folder.read_manifest(folder)
    results = latest(bench_folder.read_results(folder))
    summary = summarize(manifest.problems, results, manifest.settings.samples)
    return BenchOutcome(Path(folder), manifest, results, summary)


def _drive(out: Path, manifest: BenchManifest, options: ExecutorOptions,
           progress: BenchProgress | None) -> BenchOutcome:  # fmt: skip
    start = time.monotonic()
    db = Path(manifest.db)
    earlier = bench_folder.read_results(out)
    todo = plan(manifest, out, db, earlier, bench_folder.started_runs(out))
    for result in todo.recovered:
        bench_folder.append_result(out, result)
    executor = make_executor("ray" if options.ray_address else "local", options)
    progress = progress or BenchProgress(quiet=True)
    try:
        workers = executor.workers()
        capacity = executor.capacities(workers) if hasattr(executor, "capacities") else {}
        gate = gated(todo.jobs, capacity, manifest.settings.run_args)
        peaks = [job.peak_bytes for job in todo.jobs] if capacity else []
        if note := reference_store_note(peaks, len(workers)):
            progress.note(note)
        if unknown := sum(job.peak_bytes is None for job in todo.jobs) if capacity else 0:
            progress.note(f"{unknown} problem(s) whose device-memory peak could not be "
                          f"estimated on meta tensors run alone on their GPU")  # fmt: skip
        # GPUs used (`jobs` workers each); on a CPU, the one machine
        devices = len(workers) // max(1, options.jobs) if options.device.startswith("cuda") else 1

        def record_environment(ran: list[SampleResult]) -> None:  # a killed bench still says it
            manifest.environment = environment(db, earlier + ran, executor, devices)
            bench_folder.write_manifest(out, manifest)

        session = BenchSession(out, workers, progress, gate, record_environment)
        progress.begin(total=len(manifest.problems) * manifest.settings.samples,
                       done=todo.done + len(todo.recovered), workers=len(session.workers))  # fmt: skip
        session.run(todo.jobs)
    finally:
        progress.close()
        executor.close()
    if session.refused:
        raise UsageError(
            f"bench stopped: a run refused its options ({session.refused}). Fix them, then "
            f"continue with kernelgraph bench --resume {out}"
        )
    manifest.environment = environment(db, earlier + session.ran, executor, devices)
    bench_folder.write_manifest(out, manifest)
    outcome = load_bench(out)
    outcome.interrupted = session.interrupted or session.paused is not None
    outcome.notes += [f"paused: {session.paused}"] if session.paused else []
    outcome.elapsed_s = round(time.monotonic() - start, 1)
    outcome.ran, outcome.skipped = len(session.ran), todo.done + len(todo.recovered)
    outcome.reports = write_report(out, outcome.manifest, outcome.summary, outcome.results)
    return outcome


MACHINE_FAULTS = ("harness", "database_busy")  # CLI error kinds where trying again may work


def _machine_failed(result: SampleResult) -> bool:
    """A run the machine failed, worth resuming once more: its harness failed after its own
    retry, or the CLI stopped on the machine's fault (a harness error, or the run database
    locked past its busy timeout on a loaded box)."""
    harness = result.status == "interrupted" and result.stop_reason == "harness_error"
    return harness or (result.status == "crashed" and result.stop_reason in MACHINE_FAULTS)


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else "no message"


class BenchSession:
    """One invocation's jobs on its workers: results appended as they come; Ctrl-C stops the
    running runs (resumable); a run that refuses the bench's options stops the bench, since
    every other run would refuse them too; a run that stops resumable on its own (an endpoint
    outage) pauses it: no new run starts, and --resume continues."""

    def __init__(self, out: Path, workers: list, progress: BenchProgress,
                 gate: MemoryGate | None = None,
                 on_first_result: Callable[[list[SampleResult]], None] = lambda ran: None,
                 ) -> None:  # fmt: skip
        self.out, self.workers, self.progress = out, workers, progress
        self.ran: list[SampleResult] = []
        self.interrupted = False
        self.refused: str | None = None
        self.paused: str | None = None
        self.on_first_result = on_first_result
        self.dispatcher = Dispatcher(workers, progress.started, self._finished,
                                     self._started_run, progress.lost, _machine_failed,
                                     gate)  # fmt: skip

    def run(self, jobs: list[Job]) -> None:
        try:
            self.dispatcher.run(jobs)
        except KeyboardInterrupt:
            self.dispatcher.stop()
            stop_live_runs()
            self.interrupted = True

    def _finished(self, result: SampleResult) -> None:
        if result.exit_code == 2 and result.status in ("crashed", "interrupted"):
            self.refused = self.refused or _first_line(result.message)  # bad options, a bad key
            self.dispatcher.stop()
            return
        if result.status == "interrupted":  # not stopped by us: an endpoint outage, say
            self.paused = self.paused or _first_line(result.message)
            self.dispatcher.stop()
            return
        bench_folder.append_result(self.out, result)
        self.ran.append(result)
        if len(self.ran) == 1:
            self.on_first_result(self.ran)
        self.progress.finished(result)

    def _started_run(self, job: Job) -> str | None:
        return bench_folder.started_runs(self.out).get((job.problem["name"], job.sample))


def default_folder(suite: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"bench-{Path(suite).resolve().name}-{stamp}"


def environment(db: Path, results: list[SampleResult], executor, devices: int) -> BenchEnvironment:
    """What the figures were measured on, from the verdicts themselves (each harness worker
    records its device, driver and versions), so the bench process needs no GPU of its own."""
    env = _verdict_env(db, [r.run_id for r in results if r.run_id])
    return BenchEnvironment(
        host=socket.gethostname(),
        device_name=str(env.get("gpu_name") or env.get("cpu_model") or ""),
        devices=devices,
        driver=env.get("driver_version"),
        cuda=env.get("cuda_runtime"),
        torch=str(env.get("torch_version") or ""),
        triton=_version("triton"),
        kernelgraph=kernelgraph_version(),
        executor=executor.name,
    )


def _verdict_env(db: Path, run_ids: list[str]) -> dict:
    """The environment of the first evaluation measured by this bench's runs (a cached one's
    if every verdict came from the cache)."""
    from kernelgraph.state.store import open_store

    with open_store(db) as store:
        envs = [(e["verdict"].get("cached", False), e["env"])
                for run_id in run_ids for e in store.evaluations_for_run(run_id) if e.get("env")]  # fmt: skip
    return min(envs, key=lambda pair: pair[0], default=(False, {}))[1]


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _checkout_version() -> str | None:
    """The version in pyproject.toml, for a checkout that is not installed (a copy on a GPU box)."""
    try:
        text = (Path(IMPORT_ROOT) / "pyproject.toml").read_text()
    except OSError:
        return None
    found = re.search(r'(?m)^version\s*=\s*"([^"]+)"', text)  # [project]'s, the first one
    return found.group(1) if found else None


def kernelgraph_version() -> str:
    """The package version, and the checkout's commit when there is one."""
    version = _version("kernelgraph") or _checkout_version() or "unknown"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=IMPORT_ROOT, capture_output=True,
            text=True, timeout=5,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{version} ({commit})" if commit else version
