"""Reading the CPU's pressure-stall counter, the evidence of a loaded machine."""

from __future__ import annotations

import pytest

from kernelgraph.tools.harness.cpu_pressure import contended, cpu_stall_s
from kernelgraph.tools.harness.infra import InfraFailure, retried
from kernelgraph.tools.harness.verdict import HarnessError

PRESSURE = (
    "some avg10=1.50 avg60=2.79 avg300=39.56 total=4648948421\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)


def test_the_stall_counter_is_read_in_seconds(tmp_path):
    path = tmp_path / "cpu"
    path.write_text(PRESSURE)
    assert cpu_stall_s(path) == pytest.approx(4648.948421)


@pytest.mark.parametrize("text", [None, "", "some avg10=1.0\n", "some total=x\n"])
def test_a_missing_or_unreadable_counter_is_none(tmp_path, text):
    path = tmp_path / "cpu"
    if text is not None:
        path.write_text(text)
    assert cpu_stall_s(path) is None


@pytest.mark.parametrize(
    "stalled_s, window_s, busy", [(0.0, 1.0, False), (0.05, 1.0, False), (0.2, 1.0, True)]
)
def test_a_window_is_contended_when_tasks_waited_a_tenth_of_it(stalled_s, window_s, busy):
    assert contended(10.0, 10.0 + stalled_s, window_s) is busy


def test_without_the_counter_the_load_average_decides(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("os.getloadavg", lambda: (3.5, 1.0, 1.0))
    assert contended(None, None, 1.0)
    monkeypatch.setattr("os.getloadavg", lambda: (0.5, 1.0, 1.0))
    assert not contended(None, 12.0, 1.0)


def test_a_failure_with_a_fallback_returns_it_once_attempts_run_out():
    waits, tries = [], []

    def attempt():
        tries.append(1)
        raise InfraFailure("busy", busy=True, fallback="the rejection")

    assert retried(attempt, sleep=waits.append) == "the rejection"
    assert len(tries) == len(waits) + 1 and waits  # waited before each further attempt


def test_a_failure_without_a_fallback_is_a_harness_error():
    def attempt():
        raise InfraFailure("the sandbox could not start")

    with pytest.raises(HarnessError, match="tried 2 times"):
        retried(attempt, sleep=lambda _s: None)
