"""The sandbox's folder hiding and telling the machine's failures from a worker's own.

Children are small Python scripts (no torch), so each test takes about a second.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import uuid

import pytest
from proc_helpers import processes_with

from kernelgraph.tools.harness import sandbox
from kernelgraph.tools.harness.infra import InfraFailure, check_worker
from kernelgraph.tools.harness.sandbox import Limits, ProcessResult, Sandboxed, scrubbed_env
from kernelgraph.tools.harness.verdict import HarnessError, TaskError

needs_hiding = pytest.mark.skipif(
    not sandbox.isolation().hides_paths, reason="this machine's sandbox cannot hide folders"
)

VIEW = r"""
import ctypes, os, sys
hidden, read_only = sys.argv[1], sys.argv[2]
print("hidden lists:", sorted(os.listdir(hidden)))
libc = ctypes.CDLL(None, use_errno=True)
print("umount:", libc.umount2(hidden.encode(), 2))
print("hidden lists after umount:", sorted(os.listdir(hidden)))
try:
    open(os.path.join(read_only, "inputs.pt"), "w").write("tampered")
    print("write: done")
except OSError as exc:
    print("write: refused", exc.errno)
print("read:", open(os.path.join(read_only, "inputs.pt")).read())
"""


@needs_hiding
def test_a_worker_sees_hidden_folders_empty_and_protected_ones_read_only(tmp_path):
    hidden, read_only, home = tmp_path / "expected", tmp_path / "inputs", tmp_path / "home"
    for folder in (hidden, read_only, home):
        folder.mkdir()
    (hidden / "expected_42.pt").write_text("the reference's answer")
    (read_only / "inputs.pt").write_text("inputs")
    (tmp_path / "view.py").write_text(VIEW)
    worker = Sandboxed(
        [sys.executable, str(tmp_path / "view.py"), str(hidden), str(read_only)],
        cwd=home, env=scrubbed_env({}, home), limits=Limits(wall_s=30),
        log_path=tmp_path / "log.txt", hide=(hidden,), read_only=(read_only,),
    )  # fmt: skip
    result = worker.wait()
    log = (tmp_path / "log.txt").read_text()
    assert result.returncode == 0, log
    assert "hidden lists: []" in log
    assert "umount: -1" in log and "hidden lists after umount: []" in log  # no capabilities
    assert "write: refused" in log and "read: inputs" in log
    assert (hidden / "expected_42.pt").read_text() == "the reference's answer"  # untouched


def test_a_worker_killed_from_outside_is_told_apart_from_a_crash(tmp_path):
    marker = f"kg-outside-{uuid.uuid4().hex}"
    home = tmp_path / "home"
    home.mkdir()
    worker = Sandboxed(
        [sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(60)",
         marker],
        cwd=home, env=scrubbed_env({}, home), limits=Limits(wall_s=60),
        log_path=tmp_path / "log.txt",
    )  # fmt: skip
    while "up" not in (tmp_path / "log.txt").read_text():
        if worker.proc.poll() is not None:
            pytest.fail((tmp_path / "log.txt").read_text())
        os.sched_yield()
    inner = [p for p in processes_with(marker) if p != worker.proc.pid]  # not unshare
    (pid,) = inner or [worker.proc.pid]
    os.kill(pid, signal.SIGKILL)  # what the kernel's OOM killer does
    result = worker.wait()
    assert result.killed_from_outside, (result, (tmp_path / "log.txt").read_text())
    assert not result.timed_out and not result.rss_exceeded


def test_a_worker_that_crashes_on_its_own_is_not_the_machines_fault(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    result = Sandboxed(
        [sys.executable, "-c", "import os; os.abort()"], cwd=home,
        env=scrubbed_env({}, home), limits=Limits(wall_s=30), log_path=tmp_path / "log.txt",
    ).wait()  # fmt: skip
    assert result.returncode != 0 and not result.killed_from_outside, result


def _process(**fields) -> ProcessResult:
    base = dict(returncode=1, timed_out=False, rss_exceeded=False, wall_s=1.0,
                peak_rss_bytes=0, log_tail="")  # fmt: skip
    return ProcessResult(**{**base, **fields})


@pytest.mark.parametrize("role", ["prepare", "judge", "candidate"])
def test_an_outside_kill_is_an_infrastructure_failure_naming_the_oom_killer(role):
    process = _process(killed_from_outside=True, oom_kills=2, peak_rss_bytes=1 << 20)
    with pytest.raises(InfraFailure, match=f"{role} worker was killed by SIGKILL.*OOM killer"):
        check_worker(role, process, None, limit=8 << 30)


def test_a_candidate_killed_while_holding_most_of_its_memory_limit_crashed_itself():
    process = _process(killed_from_outside=True, oom_kills=1, peak_rss_bytes=7 << 30)
    check_worker("candidate", process, None, limit=8 << 30)  # left to the verdict: crashed


def test_a_sandbox_that_cannot_start_is_an_infrastructure_failure():
    refused = _process(log_tail="unshare: unshare failed: Operation not permitted\n")
    with pytest.raises(InfraFailure, match="sandbox could not start the judge worker: unshare"):
        check_worker("judge", refused, None, limit=1 << 30)


def test_a_worker_error_that_is_not_the_sandbox_is_left_to_the_caller():
    check_worker("prepare", _process(log_tail="Traceback ...\nValueError: bad task"), None, 1)


def test_a_device_held_by_others_is_the_machines_problem_and_too_small_is_the_tasks(
    monkeypatch,
):
    from kernelgraph.tools.harness import memory
    from kernelgraph.tools.harness.verdict import TaskError

    class Task:
        constants = {"N": 4096}

    meta = {"input_bytes": 10 << 30, "output_bytes": 10 << 30, "param_bytes": 0}  # 60 GiB
    monkeypatch.setattr(memory, "free_device_bytes", lambda device: 20 << 30)
    monkeypatch.setattr(memory, "total_device_bytes", lambda device: 80 << 30)
    with pytest.raises(memory.DeviceBusy, match="other processes hold all but 20.0 GiB"):
        memory.check_fits(meta, "cuda", Task())
    monkeypatch.setattr(memory, "total_device_bytes", lambda device: 40 << 30)
    with pytest.raises(TaskError, match=r"needs about 60.0 GiB.*--set.*N=4096"):
        memory.check_fits(meta, "cuda", Task())
    with pytest.raises(InfraFailure, match="could not go on: busy"):
        check_worker("prepare", _process(returncode=0), {"machine_error": "busy"}, 1 << 30)


def test_the_host_limit_is_a_share_of_available_memory_unless_given(monkeypatch):
    from kernelgraph.tools.harness import memory

    monkeypatch.setattr(memory, "physical_host_bytes", lambda: 128 << 30)
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 100 << 30)
    assert memory.host_limit_bytes(None) == int((100 << 30) * memory.HOST_FRACTION)
    assert memory.host_limit_bytes(2.5) == int(2.5 * 2**30)


@pytest.mark.parametrize(
    "physical, available, limit",
    [
        (128 << 30, 1 << 30, 4 << 30),  # others hold the memory (a full tmpfs): the floor
        (4 << 30, 256 << 20, int((4 << 30) * 0.6)),  # a small machine: its own share
    ],
)
def test_the_host_limit_never_drops_below_what_a_worker_needs(
    monkeypatch, physical, available, limit
):
    """A worker started while the machine is short of memory still gets room to run; a
    limit of 0.6 GiB killed a torch worker on a 128 GiB box whose /dev/shm was full."""
    from kernelgraph.tools.harness import memory

    monkeypatch.setattr(memory, "physical_host_bytes", lambda: physical)
    monkeypatch.setattr(memory, "available_host_bytes", lambda: available)
    assert memory.HOST_FRACTION == 0.6
    assert memory.host_limit_bytes(None) == limit


@pytest.mark.parametrize(
    "error, key",
    [
        (OSError(errno.ENOSPC, "No space left on device"), "machine_error"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "machine_error"),
        (OSError(errno.ENOENT, "No such file or directory"), "error"),
        (TaskError("get_inputs() failed"), "task_error"),
    ],
)
def test_a_full_disk_is_the_machines_failure_not_the_tasks(error, key):
    """A worker whose writes hit a full disk (other jobs filled it after the preflight check)
    reports a machine error, which is retried and then a harness error: never a task error."""
    from kernelgraph.tools.harness.worker import failure_result

    result = failure_result(error)
    assert set(result) & {"machine_error", "task_error", "error"} == {key}


def test_a_busy_machine_is_waited_for_and_other_failures_are_tried_twice():
    """Runs sharing a GPU take turns: a device others hold is waited for with growing pauses,
    then reported; a sandbox that cannot start is tried once more at once."""
    from kernelgraph.tools.harness.infra import BUSY_WAITS_S, retried

    slept, outcomes = [], iter(["busy", "busy", "ok"])

    def attempt():
        if next(outcomes) == "busy":
            raise InfraFailure("the prepare worker could not go on: busy", busy=True)
        return "done"

    assert retried(attempt, sleep=slept.append) == "done"
    assert slept == list(BUSY_WAITS_S[:2])

    def always_busy():
        raise InfraFailure("the prepare worker could not go on: busy", busy=True)

    slept.clear()
    with pytest.raises(HarnessError, match=f"tried {len(BUSY_WAITS_S) + 1} times"):
        retried(always_busy, sleep=slept.append)
    assert slept == list(BUSY_WAITS_S)

    def never_starts():
        raise InfraFailure("the sandbox could not start the judge worker: unshare: no")

    slept.clear()
    with pytest.raises(HarnessError, match="tried 2 times"):
        retried(never_starts, sleep=slept.append)
    assert slept == []
