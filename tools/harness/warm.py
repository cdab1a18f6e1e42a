"""Candidate workers started ahead of their evaluation. Standard library only.

A candidate worker spends seconds importing torch and its DSL before it can take a kernel. A
long-running caller (a tuning run, a benchmark) turns this pool on, and each evaluation then
starts the worker for the next one with the same settings once its own candidate is dead. That
worker imports and sets up while the judge compares, then waits on its stdin: it has seen no
kernel, task or folder yet, gets them through that pipe, and serves exactly one candidate, so
candidates stay as isolated as with a cold start. A worker left unused longer than its time
limit is discarded (its own wall-clock limit counts from its start).
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kernelgraph.tools.harness.janitor import owned_folder
from kernelgraph.tools.harness.workers import PendingWorker


@dataclass
class WarmWorker:
    worker: PendingWorker
    folder: Path  # the worker's home is inside it; whoever takes the worker removes it
    born: float

    def age_s(self) -> float:
        return time.monotonic() - self.born

    def discard(self) -> None:
        self.worker.discard()
        shutil.rmtree(self.folder, ignore_errors=True)


class WarmPool:
    """At most one unused worker per settings key; on only inside `active()`."""

    def __init__(self) -> None:
        self._users = 0
        self._idle: dict[Hashable, WarmWorker] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    @property
    def enabled(self) -> bool:
        return self._users > 0

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Keep workers warm for the evaluations made inside; the last user to leave kills
        the ones left unused."""
        with self._lock:
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                last = self._users == 0
            if last:
                self.close()

    def take(self, key: Hashable, max_age_s: float) -> WarmWorker | None:
        """The worker started for these settings, if it is alive and young enough."""
        with self._lock:
            warm = self._idle.pop(key, None)
        if warm is None:
            return None
        if warm.age_s() > max_age_s or not warm.worker.alive():
            warm.discard()
            return None
        return warm

    def refill(self, key: Hashable, start: Callable[[Path], PendingWorker]) -> None:
        """Start the next worker for `key` (`start` gets a fresh folder) unless one waits."""
        with self._lock:
            if not self.enabled or key in self._idle:
                return
        folder = owned_folder("kg-warm-")
        try:
            warm = WarmWorker(start(folder), folder, time.monotonic())
        except OSError:  # only a head start is lost: the next evaluation starts its own
            shutil.rmtree(folder, ignore_errors=True)
            return
        with self._lock:
            old, self._idle[key] = self._idle.get(key), warm
        if old is not None:
            old.discard()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
        for warm in idle:
            warm.discard()


WARM_POOL = WarmPool()
