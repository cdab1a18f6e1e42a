"""The sandbox around every worker: no secrets, no survivors, enforced limits.

The children here are small Python scripts (no torch), so each test takes about a second.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kernelgraph.tools.harness import sandbox
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.harness.sandbox import Limits, run_sandboxed, scrubbed_env

SECRETS = {
    "KERNELGRAPH_API_KEY": "sk-test-kernelgraph-4f1d2c9e7b",
    "OPENAI_API_KEY": "sk-test-openai-8a3e5d1f0c",
}

PROBE = r"""
import glob, os, sys
print("own environment:", dict(os.environ))
paths = {f"/proc/{os.getppid()}/environ", *glob.glob("/proc/*/environ")}
paths |= {f"/proc/{pid}/environ" for pid in sys.argv[1:]}
readable = 0
for path in sorted(paths):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        print("unreadable:", path, type(exc).__name__)
        continue
    readable += 1
    print(path, data.replace(b"\0", b" ").decode(errors="replace"))
print("probe done; environ files read:", readable)
"""

FORKER = r"""
import subprocess, sys, time
marker, mode = sys.argv[1], sys.argv[2]
grandchild = subprocess.Popen(
    [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(10**6)", marker],
    stdout=subprocess.PIPE,
    start_new_session=(mode == "setsid"),
)
grandchild.stdout.readline()
print("grandchild running", flush=True)
if mode != "exit":
    while True:
        time.sleep(1)
"""


def run_script(tmp_path: Path, code: str, *args: str, limits: Limits | None = None):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    script = tmp_path / "script.py"
    script.write_text(code)
    log = tmp_path / "log.txt"
    result = run_sandboxed(
        [sys.executable, str(script), *args],
        cwd=home,
        env=scrubbed_env({}, home),  # built exactly as the harness builds a worker's
        limits=limits or Limits(wall_s=30, max_rss_bytes=2 << 30),
        log_path=log,
    )
    return result, log.read_text(errors="replace")


@pytest.fixture
def secrets_in_environment(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


@pytest.fixture(params=["default", "no_namespaces"])
def isolation_mode(request, monkeypatch):
    """The sandbox as this machine allows it, and with namespaces switched off."""
    if request.param == "no_namespaces":
        monkeypatch.setenv("KERNELGRAPH_NO_NAMESPACES", "1")
    sandbox.isolation.cache_clear()
    yield sandbox.isolation()
    sandbox.isolation.cache_clear()


@pytest.fixture
def no_namespaces(monkeypatch):
    monkeypatch.setenv("KERNELGRAPH_NO_NAMESPACES", "1")
    sandbox.isolation.cache_clear()
    yield sandbox.isolation()
    sandbox.isolation.cache_clear()


@pytest.fixture
def decoy(secrets_in_environment):
    """A process started with the secrets in its environment, like a kernelgraph parent."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    yield proc
    proc.stdin.close()
    proc.wait(timeout=30)


def processes_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline.split(b"\0"):
                pids.append(int(entry.name))
    return pids


def still_running_after(pids: list[int], timeout_s: float) -> list[int]:
    """The pids that have not exited within timeout_s (waits on pidfds: no polling)."""
    alive = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            readable, _, _ = select.select([fd], [], [], timeout_s)
            if not readable:
                alive.append(pid)
        finally:
            os.close(fd)
    return alive


# ---------------------------------------------------------------- secrets


def test_scrubbed_env_drops_secrets_and_keeps_the_allow_list(secrets_in_environment, tmp_path):
    env = scrubbed_env({"HF_TOKEN": "hf-test-1", "PYTHONPATH": "/repo"}, tmp_path)
    assert not {*SECRETS, "HF_TOKEN"} & env.keys()
    assert not set(SECRETS.values()) & set(env.values())
    assert env["PYTHONPATH"] == "/repo" and env["HOME"] == str(tmp_path)
    assert env.get("PATH") == os.environ.get("PATH")


def test_worker_environment_holds_no_secret(secrets_in_environment, isolation_mode, tmp_path):
    result, log = run_script(tmp_path, PROBE)
    assert result.returncode == 0, log
    assert "probe done" in log  # the probe really ran and printed its environment
    assert "own environment:" in log
    for value in SECRETS.values():
        assert value not in log


def test_worker_cannot_read_secrets_from_other_processes(decoy, tmp_path):
    isolation = sandbox.isolation()
    if not isolation.secrets_protected:
        pytest.skip(isolation.note)
    # Outside the sandbox the decoy's secrets are there to be read: the probe is meaningful.
    exposed = Path(f"/proc/{decoy.pid}/environ").read_bytes()
    assert all(value.encode() in exposed for value in SECRETS.values())
    result, log = run_script(tmp_path, PROBE, str(decoy.pid), str(os.getpid()))
    assert result.returncode == 0, log
    assert "probe done" in log
    for value in SECRETS.values():
        assert value not in log


def test_unisolated_machine_says_so_in_every_verdict(no_namespaces, cases, tmp_path):
    assert not no_namespaces.secrets_protected
    assert "/proc/<pid>/environ" in no_namespaces.note
    verdict = evaluate(  # refused statically, so instant; the warning is still attached
        cases / "tasks/scale_add.py",
        cases / "kernels/torch_softmax.py",
        EvalConfig(dsl="cpp", seeds=2, profile=False),
        cache=EvalCache(tmp_path),
    )
    assert verdict.isolation["secrets_protected"] is False
    assert no_namespaces.note in verdict.warnings


# ---------------------------------------------------------------- no survivors, limits


@pytest.mark.parametrize("mode", ["hang", "exit", "setsid"])
def test_no_process_outlives_the_sandbox(mode, tmp_path):
    """A grandchild sleeping forever is gone once run_sandboxed returns.

    hang: the child hangs and is killed at its wall limit; exit: the child returns at once,
    leaving the grandchild behind; setsid: the grandchild also leaves the process group, which
    only the PID namespace can catch.
    """
    if mode == "setsid" and not sandbox.isolation().secrets_protected:
        pytest.skip(f"needs a PID namespace: {sandbox.isolation().note}")
    marker = f"kg-test-grandchild-{uuid.uuid4().hex}"
    try:
        result, log = run_script(tmp_path, FORKER, marker, mode, limits=Limits(wall_s=5))
        assert "grandchild running" in log, log
        assert result.timed_out is (mode != "exit")
        assert still_running_after(processes_with(marker), timeout_s=5) == []
    finally:
        for pid in processes_with(marker):  # leave nothing behind even when the test fails
            os.kill(pid, signal.SIGKILL)


def test_child_spinning_past_its_wall_limit_is_killed(tmp_path):
    result, log = run_script(
        tmp_path, "print('spinning', flush=True)\nwhile True:\n    pass\n", limits=Limits(1.5)
    )
    assert "spinning" in log
    assert result.timed_out and not result.rss_exceeded
    assert result.signal_name == "SIGKILL"
    assert 1.5 <= result.wall_s < 1.5 + 10


def test_child_over_its_memory_limit_is_killed(tmp_path):
    code = "data = b'x' * (1 << 30)\nprint('allocated', flush=True)\nwhile True:\n    pass\n"
    result, _ = run_script(tmp_path, code, limits=Limits(wall_s=60, max_rss_bytes=256 << 20))
    assert result.rss_exceeded and not result.timed_out
    assert result.peak_rss_bytes > 256 << 20
    assert result.rss_limit_bytes == 256 << 20
    assert result.wall_s < 30  # the watchdog ended it, not the wall clock
