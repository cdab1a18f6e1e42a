"""Configurations compiled ahead: while one candidate is verified and timed, the next ones the
brain will write are compile-checked in parallel, so tuning N configurations costs about N
timings rather than N compiles in a row.

A compile check is a sandboxed worker (`kernelgraph.tools.harness.compile_only`); its report goes to the
run's compile-report cache under the key the compiler node looks up, and the kernels it builds
go to the build caches every worker shares (Triton's, torch's extensions). When the graph
reaches one of these candidates, its compile gate and its candidate worker find them built.
Nothing here verifies or times anything: every configuration is still a candidate of its own in
the graph, checked and profiled one at a time.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
from collections.abc import Callable
from pathlib import Path

# The inputs a compile check makes live on the run's device while it runs: above this much for
# all checks at once (the task's minimum bytes times the workers), nothing is compiled ahead.
MAX_DEVICE_BYTES = 8 << 30


def compile_key(code: str, task_hash: str, dsl: str, target: str, timeout_s, policy: str) -> str:
    """The compile-report cache key of a kernel file, shared by the compiler node."""
    parts = [code, task_hash, dsl, target, timeout_s, policy]
    return "compile-" + hashlib.sha256(json.dumps(parts, default=repr).encode()).hexdigest()[:32]


class Prebuilder:
    """Daemon threads that run compile checks from a queue (daemon: an ending run does not
    wait for them; their sandboxed workers die with the process)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._jobs: queue.Queue[tuple[str, Callable[[], None]]] = queue.Queue()
        self._pending: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        for _ in range(workers):
            threading.Thread(target=self._work, daemon=True, name="kg-prebuild").start()

    def submit(self, key: str, build: Callable[[], None]) -> bool:
        """Queue `build` (which stores its report under `key`) unless `key` is queued already."""
        if not self.workers:
            return False
        with self._lock:
            if key in self._pending:
                return False
            self._pending[key] = threading.Event()
        self._jobs.put((key, build))
        return True

    def wait(self, key: str, timeout_s: float) -> None:
        """Let a compile of `key` that is under way finish, rather than start a second one."""
        with self._lock:
            done = self._pending.get(key)
        if done is not None:
            done.wait(timeout_s)

    def _work(self) -> None:
        while True:
            key, build = self._jobs.get()
            try:
                build()
            except Exception:  # noqa: BLE001 - a failed prebuild only means no head start
                pass
            finally:
                with self._lock:
                    self._pending.pop(key).set()


def prebuild_file(artifacts: Path, code: str) -> Path:
    """Where a configuration compiled ahead is written for its compile check."""
    path = artifacts / "prebuild" / f"{hashlib.sha256(code.encode()).hexdigest()[:16]}.py"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    return path
