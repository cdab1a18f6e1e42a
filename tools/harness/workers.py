"""Starting a sandboxed harness worker, and what the parent keeps of it. Standard library only."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelgraph import IMPORT_ROOT
from kernelgraph.tools.harness.cache import shared_build_env
from kernelgraph.tools.harness.exchange import write_json
from kernelgraph.tools.harness.fifo_clock import FifoClock
from kernelgraph.tools.harness.sandbox import Limits, ProcessResult, Sandboxed, scrubbed_env


@dataclass
class WorkerRun:
    process: ProcessResult
    result: dict | None
    marks: dict[str, float] = field(default_factory=dict)
    cpu_stalls: dict[str, float | None] = field(default_factory=dict)  # cpu_pressure, per mark


@dataclass
class PendingWorker:
    role: str
    home: Path
    process: Sandboxed
    fifo: FifoClock | None
    started: float

    def alive(self) -> bool:
        return self.process.proc.poll() is None

    def discard(self) -> None:
        """Kill it (its whole process group) and stop listening to its clock."""
        self.process.kill()
        self.process.wait()
        if self.fifo:
            self.fifo.close()


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker is started: its limits, threads, extra environment and sandbox folders."""

    limit_s: float
    host_limit: int
    threads: int
    env: tuple[tuple[str, str], ...] = ()
    hide: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()


def spawn_worker(
    home: Path,
    role: str,
    spec: dict,
    settings: WorkerSettings,
    clock: bool = False,
    private: dict | None = None,
    stdin: bool = False,
) -> PendingWorker:
    """Start a worker in `home`. With `private`, that part of its spec goes through its stdin
    (never a file another worker could read); with it or `stdin`, the worker may wait there for
    messages."""
    uses_stdin = stdin or private is not None
    home.mkdir(parents=True, exist_ok=True)
    limit = settings.limit_s  # the parent's clock restarts at go(); the worker's own does not
    self_limit = limit * (2 if uses_stdin else 1) + 30
    spec = {**spec, "result": str(home / "result.json"), "self_limit_s": self_limit}
    fifo = FifoClock(home / "clock") if clock else None
    if fifo:
        spec["clock"] = str(fifo.path)
    spec["spawned_at"] = time.time()
    write_json(home / "spec.json", spec)
    extra = {
        "PYTHONPATH": os.pathsep.join(filter(None, [IMPORT_ROOT, os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": str(settings.threads),
        **shared_build_env(),
        **dict(settings.env),
    }
    process = Sandboxed(
        [sys.executable, "-m", "kernelgraph.tools.harness.worker", role, str(home / "spec.json")],
        cwd=home,
        env=scrubbed_env(extra, home),
        limits=Limits(limit, settings.host_limit),
        log_path=home / "log.txt",
        stdin_pipe=uses_stdin,
        hide=settings.hide,
        read_only=settings.read_only,
    )
    if private is not None:
        send(process, private)
    return PendingWorker(role, home, process, fifo, process.start)


def send(process: Sandboxed, message: dict, close: bool = False) -> None:
    process.send(json.dumps(message).encode() + b"\n", close=close)
