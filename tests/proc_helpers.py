"""Finding processes left behind: harness workers put their work directory in their cmdline."""

from __future__ import annotations

import time
from pathlib import Path


def processes_with(marker: str | Path) -> list[int]:
    """Live (non-zombie) processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(marker).encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def wait_until_gone(marker: str | Path, within_s: float = 15.0) -> list[int]:
    """The processes still alive after `within_s`: a killed process takes a moment to exit
    (its PID namespace's other members are killed after it), more so on a loaded machine."""
    deadline = time.monotonic() + within_s
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)  # waiting for the kernel to reap killed processes, not for work
    return left
