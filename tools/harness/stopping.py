"""Stopping every sandboxed worker of this process at once. Standard library only.

A parallel search evaluates several candidates on threads. Ctrl-C (or SIGTERM) reaches the main
thread only, and LangGraph waits for the running branches before it raises there, so the
evaluations under way would run to their end first. Inside `stop_workers_on_signal()`, the
signal first kills every live worker and marks the process as stopping. A worker's wait then
raises KeyboardInterrupt in its own thread, so no verdict is formed from a killed worker. The
mark stays until the next run starts: a lane's thread may outlive the stream.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

STOPPING = threading.Event()
_live: set[Any] = set()  # Sandboxed workers started and not yet waited for
_lock = threading.Lock()


def track(process: Any) -> None:
    with _lock:
        _live.add(process)


def untrack(process: Any) -> None:
    with _lock:
        _live.discard(process)


def stop_all() -> None:
    STOPPING.set()
    with _lock:
        live = list(_live)
    for process in live:
        with contextlib.suppress(OSError):
            process.kill()


def raise_if_stopping() -> None:
    if STOPPING.is_set():
        raise KeyboardInterrupt("the run is stopping")


@contextlib.contextmanager
def stop_workers_on_signal() -> Iterator[None]:
    """SIGINT/SIGTERM kill the workers, then go to their previous handlers (main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    STOPPING.clear()

    def handler(signum: int, frame: Any) -> None:
        stop_all()
        before = previous[signum]
        if callable(before):
            before(signum, frame)
        else:  # the default action (or none): restore it and take it
            signal.signal(signum, before)
            os.kill(os.getpid(), signum)

    for signum in previous:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        # STOPPING stays set after a signal: the stream can end before every lane's thread
        # has, and a lane must not start a worker (or form a verdict) after the run stopped
        for signum, before in previous.items():
            signal.signal(signum, before)
