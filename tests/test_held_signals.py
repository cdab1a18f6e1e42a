"""A Ctrl-C that lands while a worker is forked reaches the user's run, and kills that worker."""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest
from proc_helpers import wait_until_gone

from kernelgraph.tools.harness import held_signals
from kernelgraph.tools.harness.sandbox import Limits, Sandboxed

ARMED = {"sigint_in_fork_hook": False}


def _ctrl_c() -> None:
    """SIGINT to the main thread, where Python runs its handlers. (Sent to the process, the
    kernel may hand it to another thread, e.g. one of torch's OpenMP workers, and the main
    thread then sees it only some time later.)"""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def _interrupt_from_the_fork_hook() -> None:
    if ARMED["sigint_in_fork_hook"]:
        ARMED["sigint_in_fork_hook"] = False
        _ctrl_c()


os.register_at_fork(after_in_parent=_interrupt_from_the_fork_hook)  # inert unless armed


def start_sleeper(tmp_path) -> Sandboxed:
    return Sandboxed(
        [sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path)],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "")},
        limits=Limits(60, 1 << 30),
        log_path=tmp_path / "log.txt",
    )


@pytest.fixture(autouse=True)
def interruptible():
    """Ctrl-C raises KeyboardInterrupt here, as in a terminal, even when pytest was started in
    the background (where the shell leaves SIGINT ignored and Python keeps it so)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_signal_inside_is_delivered_on_the_way_out():
    reached_the_end = False
    with pytest.raises(KeyboardInterrupt):
        with held_signals.held():
            _ctrl_c()
            reached_the_end = True
    assert reached_the_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_ctrl_c_during_fork_is_raised_and_the_new_worker_killed(tmp_path):
    ARMED["sigint_in_fork_hook"] = True  # Python would print "Exception ignored" and go on
    with pytest.raises(KeyboardInterrupt):
        start_sleeper(tmp_path)
    assert not ARMED["sigint_in_fork_hook"]  # the hook did run during this fork
    assert wait_until_gone(tmp_path) == []


def test_a_worker_started_without_a_signal_runs(tmp_path):
    worker = start_sleeper(tmp_path)
    assert worker.proc.poll() is None
    worker.kill()
    assert worker.wait().returncode is not None
