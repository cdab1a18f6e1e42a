"""How long runnable tasks waited for a CPU: the evidence that a loaded machine, not the
candidate, stretched a timing loop. Standard library only.

Linux's pressure-stall information (/proc/pressure/cpu, "some" line) counts the time at least
one runnable task waited for a CPU. Where it is missing, a one-minute load above the CPU
count stands in.
"""

from __future__ import annotations

import os
from pathlib import Path

PRESSURE_FILE = Path("/proc/pressure/cpu")
# A loop whose runnable tasks waited for a CPU this share of its time ran on a loaded machine.
CONTENDED_SHARE = 0.1


def cpu_stall_s(path: Path = PRESSURE_FILE) -> float | None:
    """Seconds, since boot, that some runnable task waited for a CPU; None where not kept."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("some "):
                fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
                return int(fields["total"]) / 1e6
    except (OSError, ValueError, KeyError):
        return None
    return None


def contended(stall_at_start: float | None, stall_at_end: float | None, window_s: float) -> bool:
    """Whether other work competed for the CPUs during a `window_s` window."""
    if stall_at_start is not None and stall_at_end is not None and window_s > 0:
        return stall_at_end - stall_at_start >= CONTENDED_SHARE * window_s
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except OSError:
        return False
