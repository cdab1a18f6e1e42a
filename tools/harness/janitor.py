"""Removing an evaluation's folders off its critical path. Standard library only.

A 6 GB task leaves some 25 GB of candidate outputs in shared memory, and freeing them takes
seconds. They are removed by a background thread; the next evaluation waits for it before its
candidate may run, so nothing is timed while pages are being freed. Interpreter exit joins the
thread (it is not a daemon), so nothing is left behind by a normal exit.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterable
from pathlib import Path


class Janitor:
    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def remove(self, folders: Iterable[Path]) -> None:
        """Start removing `folders` (each with everything in it) in the background."""
        folders = list(folders)
        thread = threading.Thread(target=_remove_all, args=(folders,), name="kg-janitor")
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def wait(self) -> float:
        """Block until every removal started so far is done; returns the seconds waited."""
        start = time.monotonic()
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()
        return time.monotonic() - start


def _remove_all(folders: list[Path]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


JANITOR = Janitor()
