"""Removing an evaluation's folders off its critical path. Standard library only.

A 6 GB task leaves some 25 GB of candidate outputs in shared memory, and freeing them takes
seconds. They are removed by a background thread; the next evaluation waits for it before its
candidate may run, so nothing is timed while pages are being freed. Interpreter exit joins the
thread (it is not a daemon), so nothing is left behind by a normal exit. A process killed
outright (SIGKILL, the OOM killer) cannot clean up: its folders carry its pid and host, and the
next process on that host removes those whose owner is gone.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from kernelgraph.tools.harness.exchange import work_root

# kg-eval-PID@HOST-xxxxxxxx, as made by owned_folder (mkdtemp's suffix: 8 of [a-z0-9_])
LEFT_BEHIND = re.compile(r"^kg-(?:eval|warm)-(\d+)@(.+)-[a-z0-9_]{8}$")


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


def owned_folder(prefix: str) -> Path:
    """A new folder under the work root, named after this process and host."""
    sweep_left_behind()
    owner = f"{os.getpid()}@{socket.gethostname()}"
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner}-", dir=work_root()))


@functools.cache
def sweep_left_behind() -> int:
    """Start removing folders left by dead processes of this host (once per process)."""
    host, stale = socket.gethostname(), []
    try:
        entries = list(work_root().iterdir())
    except OSError:
        return 0
    for entry in entries:
        found = LEFT_BEHIND.match(entry.name)
        if found and found.group(2) == host and not _alive(int(found.group(1))):
            stale.append(entry)
    if stale:
        JANITOR.remove(stale)
    return len(stale)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True
