"""One live process per run: the lock records the holder's host, PID and PID start time.

A second `resume` of a live run is refused; a lock whose process is gone (killed, crashed,
rebooted) is taken over. The start time guards against PID reuse after a reboot.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from kernelgraph.state.tables import Run


class RunLocked(Exception):
    """The run is being worked on by another live process."""


def _start_ticks(pid: int) -> float | None:
    """The process's start time in clock ticks since boot (Linux), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie holds nothing
        return -1.0
    return float(fields[19])


def _alive(pid: int, started: float | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    ticks = _start_ticks(pid)
    if ticks == -1.0:
        return False
    return started is None or ticks is None or ticks == started


def held_by_live_process(run: dict) -> bool:
    """Whether a run row's lock belongs to a process still alive (on this host)."""
    if not run.get("lock_pid"):
        return False
    if run.get("lock_host") != socket.gethostname():
        return True  # cannot tell: assume it lives
    return _alive(run["lock_pid"], run.get("lock_started"))


def acquire(store, run_id: str) -> None:
    """Take the run's lock for this process, or raise RunLocked naming the holder."""
    host, pid = socket.gethostname(), os.getpid()
    with store._session.begin() as s:
        run = s.get(Run, run_id)
        if run is None:
            raise KeyError(run_id)
        holder = run.lock_pid
        if holder and holder != pid:
            if run.lock_host != host:
                raise RunLocked(
                    f"run {run_id} is locked by process {holder} on host {run.lock_host}; "
                    f"if that process is gone, run `kernelgraph unlock {run_id}` there or here."
                )
            if _alive(holder, run.lock_started):
                raise RunLocked(
                    f"run {run_id} is already running in process {holder}. Wait for it, or "
                    f"stop it (kill {holder}) and resume again."
                )
        run.lock_pid, run.lock_host, run.lock_started = pid, host, _start_ticks(pid)


def release(store, run_id: str) -> None:
    with store._session.begin() as s:
        run = s.get(Run, run_id)
        if run is not None and run.lock_pid == os.getpid():
            run.lock_pid = run.lock_host = run.lock_started = None


def force_release(store, run_id: str) -> None:
    with store._session.begin() as s:
        run = s.get(Run, run_id)
        if run is not None:
            run.lock_pid = run.lock_host = run.lock_started = None
