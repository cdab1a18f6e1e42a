"""Progress of a bench on stderr: a rich progress bar on a terminal, plain lines otherwise.
It shows jobs done of all, passed, running, and an ETA from the mean wall time so far."""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kernelgraph.state.bench import SampleResult


class BenchProgress:
    def __init__(self, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.lock = threading.Lock()
        self.total = self.done = self.passed = self.workers = 0
        self.running: dict[str, str] = {}  # job key -> worker
        self.started_at = time.monotonic()
        self.finished_here = 0
        self.bar: Progress | None = None
        self.task_id = None

    def begin(self, total: int, done: int, workers: int) -> None:
        self.total, self.done, self.workers = total, done, workers
        self.started_at = time.monotonic()
        if self.quiet:
            return
        if self.console.is_terminal:
            self.bar = Progress(
                TextColumn("[bold]bench[/]"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                console=self.console, transient=False,
            )  # fmt: skip
            self.task_id = self.bar.add_task("bench", total=total, completed=done, status="")
            self.bar.start()
        else:
            self._line(f"{total} jobs, {done} already done, {workers} workers")

    def started(self, job, worker: str) -> None:
        with self.lock:
            self.running[job.key] = worker
        self._refresh(f"start {job.key} on {worker}")

    def lost(self, job, why: str) -> None:
        with self.lock:
            self.running.pop(job.key, None)
        self._refresh(f"{job.key}: worker lost ({why}); the job goes back in the queue")

    def finished(self, result: SampleResult) -> None:
        with self.lock:
            self.running.pop(f"{result.problem}#{result.sample}", None)
            self.done += 1
            self.finished_here += 1
            self.passed += result.verified
        speed = f" {result.speedup_vs_eager:.2f}x" if result.speedup_vs_eager else ""
        self._refresh(f"{result.problem} {result.status}{speed} ({result.wall_s:.0f} s)")

    def status(self) -> str:
        eta = self.eta_s()
        left = "" if eta is None else f", ETA {int(eta // 60)}m{int(eta % 60):02d}s"
        return f"passed {self.passed}, running {len(self.running)}{left}"

    def eta_s(self) -> float | None:
        """Jobs left x mean time per finished job of this invocation, over the workers."""
        if not self.finished_here:
            return None
        per_job = (time.monotonic() - self.started_at) / self.finished_here
        return per_job * max(0, self.total - self.done)

    def _refresh(self, event: str) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.update(self.task_id, completed=self.done, status=self.status())
            self.bar.console.print(event, highlight=False, markup=False)
        else:
            self._line(f"[{self.done}/{self.total}] {event} | {self.status()}")

    def note(self, text: str) -> None:
        if not self.quiet:
            self._line(text)

    def _line(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
