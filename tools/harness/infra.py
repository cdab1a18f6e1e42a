"""Telling the machine's failures from the task's and the candidate's. Standard library only.

A worker that the sandbox could not start, or that something outside kernelgraph killed (the
kernel's OOM killer when several jobs share a box), says nothing about the task or the kernel:
the evaluation is tried again, and if it keeps happening the user gets a HarnessError that
names the cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kernelgraph.tools.harness.sandbox import ProcessResult
from kernelgraph.tools.harness.verdict import HarnessError

T = TypeVar("T")

ATTEMPTS = 2
# A device or disk that other jobs hold is waited for (runs sharing a GPU take turns with big
# tasks): seconds before each further attempt, about two minutes in all.
BUSY_WAITS_S = (5.0, 15.0, 30.0, 60.0)
SANDBOX_TOOLS = ("unshare:", "setpriv:", "mount:", "kg-sandbox:")
# A candidate killed from outside while holding at least this share of its host-memory limit
# most likely brought the OOM killer on itself: that is its own crash, not the machine's.
OWN_MEMORY_SHARE = 0.5


class InfraFailure(Exception):
    """One attempt failed for reasons of the machine; the caller retries. `disk_bytes`: the
    free disk the reference store needs (the caller can make room before retrying). `busy`:
    others hold what it needs, so waiting can help. `fallback`: the result that stands when
    every attempt failed this way (a rejection the load may explain), instead of an error."""

    def __init__(
        self, message: str, disk_bytes: int = 0, busy: bool = False, fallback: Any = None
    ) -> None:
        super().__init__(message)
        self.disk_bytes = disk_bytes
        self.busy = busy
        self.fallback = fallback


def check_worker(role: str, process: ProcessResult, result: dict | None, limit: int) -> None:
    """Raise InfraFailure when `role`'s worker failed because of the machine."""
    if result and result.get("machine_error"):
        raise InfraFailure(
            f"the {role} worker could not go on: {result['machine_error']}",
            disk_bytes=int(result.get("disk_bytes") or 0),
            busy=True,
        )
    if process.killed_from_outside:
        if role == "candidate" and process.peak_rss_bytes >= OWN_MEMORY_SHARE * limit:
            return  # its own appetite: assemble reports it as the candidate's crash
        raise InfraFailure(f"the {role} worker was killed by SIGKILL from outside kernelgraph "
                           f"({killer(process)})")  # fmt: skip
    if result is None and process.returncode not in (0, None):
        refusal = [line for line in process.log_tail.splitlines() if line.startswith(SANDBOX_TOOLS)]
        if refusal:
            raise InfraFailure(f"the sandbox could not start the {role} worker: {refusal[-1]}")


def killer(process: ProcessResult) -> str:
    if process.oom_kills:
        return (
            f"the system's OOM killer killed {process.oom_kills} process(es) meanwhile: host "
            f"memory ran out, often because other jobs share this machine; run fewer at once "
            f"or lower --max-host-memory"
        )
    return "no OOM kill was recorded; another process or an administrator sent it"


def retried(attempt: Callable[[], T], sleep: Callable[[float], None] = time.sleep) -> T:
    """`attempt()`, again when the machine failed it; a HarnessError once that persists. A
    machine busy with other jobs is waited for (BUSY_WAITS_S) before each further attempt."""
    failure, tries, waits = None, 0, list(BUSY_WAITS_S)
    while True:
        try:
            return attempt()
        except InfraFailure as exc:
            failure, tries = exc, tries + 1
        if failure.busy and waits:
            sleep(waits.pop(0))
        elif tries >= ATTEMPTS:
            if failure.fallback is not None:
                return failure.fallback
            raise HarnessError(give_up_message(failure, tries))


def give_up_message(failure: InfraFailure | None, tries: int = ATTEMPTS) -> str:
    return f"{failure} (tried {tries} times: the machine, not the task or the kernel)."
