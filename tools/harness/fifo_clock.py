"""The parent's own clock for the candidate's phase marks. Standard library only."""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path

from kernelgraph.tools.harness.cpu_pressure import cpu_stall_s


class FifoClock(threading.Thread):
    """Timestamps the candidate's phase marks with the parent's own clock."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        os.mkfifo(path, 0o600)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.marks: dict[str, float] = {}
        self.cpu_stalls: dict[str, float | None] = {}  # the CPU's stall counter at each mark
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
                name = line.decode(errors="replace")[:32]
                if name not in self.marks:
                    self.marks[name] = now
                    self.cpu_stalls[name] = cpu_stall_s()

    def close(self) -> dict[str, float]:
        self._done.set()
        self.join(timeout=1)
        os.close(self.fd)
        return dict(self.marks)
