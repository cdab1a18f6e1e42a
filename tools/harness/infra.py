"""Telling the machine's failures from the task's and the candidate's. Standard library only.

A worker that the sandbox could not start, or that something outside kernelgraph killed (the
kernel's OOM killer when several jobs share a box), says nothing about the task or the kernel:
the evaluation is tried again, and if it keeps happening the user gets a HarnessError that
names the cause.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kernelgraph.tools.harness.sandbox import ProcessResult
from kernelgraph.tools.harness.verdict import HarnessError

T = TypeVar("T")

ATTEMPTS = 2
SANDBOX_TOOLS = ("unshare:", "setpriv:", "mount:", "kg-sandbox:")
# A candidate killed from outside while holding at least this share of its host-memory limit
# most likely brought the OOM killer on itself: that is its own crash, not the machine's.
OWN_MEMORY_SHARE = 0.5


class InfraFailure(Exception):
    """One attempt failed for reasons of the machine; the caller retries. `disk_bytes`: the
    free disk the reference store needs (the caller can make room before retrying)."""

    def __init__(self, message: str, disk_bytes: int = 0) -> None:
        super().__init__(message)
        self.disk_bytes = disk_bytes


def check_worker(role: str, process: ProcessResult, result: dict | None, limit: int) -> None:
    """Raise InfraFailure when `role`'s worker failed because of the machine."""
    if result and result.get("machine_error"):
        raise InfraFailure(
            f"the {role} worker could not go on: {result['machine_error']}",
            disk_bytes=int(result.get("disk_bytes") or 0),
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


def retried(attempt: Callable[[], T]) -> T:
    """`attempt()`, again when the machine failed it; a HarnessError once that persists."""
    failure = None
    for _ in range(ATTEMPTS):
        try:
            return attempt()
        except InfraFailure as exc:
            failure = exc
    raise HarnessError(give_up_message(failure))


def give_up_message(failure: InfraFailure | None) -> str:
    return f"{failure} (tried {ATTEMPTS} times: the machine, not the task or the kernel)."
