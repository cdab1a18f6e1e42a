"""Running untrusted code in a fresh, contained subprocess. Standard library only.

Each worker gets: its own session and process group; a wall-clock limit that kills the group;
an RSS watchdog (RLIMIT_AS would break CUDA); a CPU-time rlimit and a parent-death signal so
that no orphan outlives kernelgraph; a scrubbed environment built from an allow-list; its own
HOME and TMPDIR. Where the OS allows it, the worker also runs in fresh PID, mount and network
namespaces: it cannot see other processes (so not /proc/PPID/environ, where an API key could
be), and it has no network.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelgraph.tools.harness import held_signals, stopping

PR_SET_PDEATHSIG = 1
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
ENV_ALLOW = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "TORCH_CUDA_ARCH_LIST",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)


@dataclass
class Isolation:
    """How well the sandbox can contain a worker on this machine."""

    method: str
    secrets_protected: bool
    network_off: bool
    prefix: list[str] = field(default_factory=list)
    note: str = ""
    hides_paths: bool = False  # a worker's view can hide folders and make others read-only

    def describe(self) -> dict:
        return {
            "method": self.method,
            "secrets_protected": self.secrets_protected,
            "network_off": self.network_off,
            "hides_paths": self.hides_paths,
            "note": self.note,
        }

    def wrap(self, argv: list[str], hide: Sequence[Path], read_only: Sequence[Path]) -> list[str]:
        """argv run inside the namespaces; with folders to hide or protect, a shell mounts an
        empty tmpfs over each hidden one and remounts the others read-only, then the worker
        runs without capabilities, so it cannot undo those mounts."""
        if not (hide or read_only) or not self.hides_paths:
            return [*self.prefix, *argv]
        mounts = [arg for p in hide for arg in ("hide", str(p))]
        mounts += [arg for p in read_only for arg in ("ro", str(p))]
        return [*self.prefix, "/bin/sh", "-c", _MOUNT_SCRIPT, "kg-sandbox", *mounts, "--",
                *_DROP_CAPS, *argv]  # fmt: skip


@dataclass
class Limits:
    wall_s: float = 300.0
    max_rss_bytes: int = 16 << 30
    cpu_s: float | None = None  # default: wall_s x cores + slack


@dataclass
class ProcessResult:
    returncode: int | None
    timed_out: bool
    rss_exceeded: bool
    wall_s: float
    peak_rss_bytes: int
    log_tail: str
    killed_from_outside: bool = False  # SIGKILL that neither the harness nor the worker sent
    oom_kills: int = 0  # the system's OOM-killer count rose this much while the worker ran
    rss_limit_bytes: int = 0  # the host-memory limit it ran under

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            return signal.Signals(-self.returncode).name
        return None


_NAMESPACE_FLAGS = ["--pid", "--fork", "--mount-proc", "--net", "--kill-child"]
_MOUNT_SCRIPT = """set -e
while [ "$1" != "--" ]; do
  mkdir -p "$2"
  if [ "$1" = hide ]; then mount -t tmpfs -o size=4k,mode=0500 kg-hidden "$2"
  else mount --bind "$2" "$2" && mount -o remount,bind,ro "$2"; fi
  shift 2
done
shift
exec "$@"
"""
_DROP_CAPS = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"]
# unshare reports a child killed by SIGKILL (the system's OOM killer, say) with this line and
# exit status 1, because it cannot re-raise SIGKILL on itself.
_UNSHARE_CHILD_KILLED = "sigprocmask unblock failed"


@functools.cache
def isolation() -> Isolation:
    """Probe once per process for the strongest containment the OS grants."""
    if os.environ.get("KERNELGRAPH_NO_NAMESPACES") == "1":
        return _no_isolation("namespaces disabled by KERNELGRAPH_NO_NAMESPACES=1")
    unshare = shutil.which("unshare")
    if unshare is None:
        return _no_isolation("`unshare` (util-linux) is not installed")
    candidates = [[unshare, *_NAMESPACE_FLAGS]]
    if os.geteuid() != 0:
        candidates.insert(0, [unshare, "--user", "--map-root-user", *_NAMESPACE_FLAGS])
    for prefix in candidates:
        probe = subprocess.run(
            [*prefix, sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if probe.returncode == 0 and probe.stdout.strip() == "1":
            found = Isolation("pid+mount+net namespaces", True, True, prefix)
            found.hides_paths = _can_hide_paths(found)
            return found
    return _no_isolation("the kernel refused new PID/network namespaces (unshare failed)")


def _can_hide_paths(iso: Isolation) -> bool:
    """Whether a worker really sees an empty, unmountable folder where a hidden one is."""
    if shutil.which("setpriv") is None:
        return False
    probe_dir = Path(tempfile.mkdtemp(prefix="kg-hide-probe-"))
    try:
        (probe_dir / "hidden").mkdir()
        (probe_dir / "hidden" / "secret").write_text("x")
        check = (
            "import ctypes, os, sys\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "undone = libc.umount2(sys.argv[1].encode(), 2) == 0\n"
            "print('ok' if not os.listdir(sys.argv[1]) and not undone else 'visible')\n"
        )
        iso.hides_paths = True  # let wrap() build the command under test
        argv = iso.wrap([sys.executable, "-c", check, str(probe_dir / "hidden")],
                        [probe_dir / "hidden"], [])  # fmt: skip
        probe = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return probe.returncode == 0 and probe.stdout.strip() == "ok"
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)


def _no_isolation(reason: str) -> Isolation:
    return Isolation(
        "process group only",
        False,
        False,
        [],
        f"{reason}: candidates can see other processes (and could read an API key from "
        f"/proc/<pid>/environ of a process that holds one) and can reach the network. Run "
        f"kernelgraph where unprivileged user namespaces are allowed, or as a user that holds "
        f"no key.",
    )


def scrubbed_env(extra: dict[str, str], home: Path) -> dict[str, str]:
    """An allow-listed environment: nothing that could carry a secret reaches the worker."""
    env = {name: os.environ[name] for name in ENV_ALLOW if name in os.environ}
    env.update(extra)
    env.update(
        HOME=str(home),
        TMPDIR=str(home / "tmp"),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        PYTHONNOUSERSITE="1",
    )
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    return {k: v for k, v in env.items() if not any(m in k.upper() for m in SECRET_MARKERS)}


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In a child between fork and exec: get `sig` when the parent dies, so no child outlives
    the process that started it (even one killed by SIGKILL)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _child_setup(cpu_s: int) -> None:
    """Runs in the child between fork and exec: die with the parent, cap CPU time, no cores."""
    die_with_parent()
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class Sandboxed:
    """A contained worker that has been started; `wait()` collects its verdict as a process.

    With `stdin_pipe`, only this parent can talk to it (through `send`): a pipe is not a path
    that another process could open.
    """

    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        limits: Limits,
        log_path: Path,
        stdin_pipe: bool = False,
        hide: Sequence[Path] = (),
        read_only: Sequence[Path] = (),
    ) -> None:
        iso = isolation()
        cpu_s = int(limits.cpu_s or limits.wall_s * (os.cpu_count() or 1) + 60)
        self.limits, self.log_path = limits, log_path
        self.start = time.monotonic()
        self.oom_kills_before = oom_kill_count()
        self.proc: subprocess.Popen | None = None
        stopping.raise_if_stopping()  # the run is stopping: start nothing new
        with open(log_path, "wb") as log:
            try:
                with held_signals.held():  # a Ctrl-C during fork would be lost, not raised
                    self.proc = subprocess.Popen(
                        iso.wrap(argv, hide, read_only),
                        cwd=cwd,
                        env=env,
                        stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=functools.partial(_child_setup, cpu_s),
                    )
            except BaseException:
                if self.proc is not None:  # started, then interrupted: nobody else will kill it
                    _kill_group(self.proc.pid)
                    self.proc.wait()
                raise
        self.watchdog = _RssWatchdog(self.proc.pid, limits.max_rss_bytes)
        self.watchdog.start()
        stopping.track(self)

    def send(self, data: bytes, close: bool = False) -> None:
        """Write to the worker's stdin; a worker that already died is ignored."""
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            if close:
                self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def restart_clock(self) -> None:
        self.start = time.monotonic()

    killed_by_harness = False

    def kill(self) -> None:
        self.killed_by_harness = True
        _kill_group(self.proc.pid)

    def wait(self) -> ProcessResult:
        timed_out = False
        remaining = self.limits.wall_s - (time.monotonic() - self.start)
        try:
            self.proc.wait(timeout=max(remaining, 0.01))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(self.proc.pid)
            self.proc.wait()
            self.watchdog.stop()
            if self.proc.stdin:
                with contextlib.suppress(OSError):  # unsent bytes to a dead worker
                    self.proc.stdin.close()
            stopping.untrack(self)
        stopping.raise_if_stopping()  # killed because the run stops: no verdict from it
        log_tail = _tail(self.log_path)
        ours = timed_out or self.watchdog.exceeded or self.killed_by_harness
        sigkill = self.proc.returncode == -signal.SIGKILL or (
            self.proc.returncode == 1 and _UNSHARE_CHILD_KILLED in log_tail
        )
        return ProcessResult(
            returncode=self.proc.returncode,
            timed_out=timed_out and not self.watchdog.exceeded,
            rss_exceeded=self.watchdog.exceeded,
            wall_s=time.monotonic() - self.start,
            peak_rss_bytes=self.watchdog.peak,
            log_tail=log_tail,
            killed_from_outside=sigkill and not ours,
            oom_kills=max(oom_kill_count() - self.oom_kills_before, 0),
            rss_limit_bytes=self.watchdog.limit,
        )


def run_sandboxed(
    argv: list[str], cwd: Path, env: dict[str, str], limits: Limits, log_path: Path
) -> ProcessResult:
    """Run argv contained; stdout and stderr go to log_path. Never raises for the child's sake."""
    return Sandboxed(argv, cwd, env, limits, log_path).wait()


def oom_kill_count() -> int:
    """How many processes the kernel's OOM killer has killed since boot (0 if unknown)."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode(errors="replace")


class _RssWatchdog(threading.Thread):
    """Polls the resident memory of the worker's process group; kills the group over limit."""

    def __init__(self, pgid: int, limit: int) -> None:
        super().__init__(daemon=True)
        self.pgid, self.limit = pgid, limit
        self.peak = 0
        self.exceeded = False
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=2)

    def run(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop_event.wait(0.1):
            rss = sum(_rss_pages(pid) for pid in _group_pids(self.pgid)) * page
            self.peak = max(self.peak, rss)
            if rss > self.limit:
                self.exceeded = True
                _kill_group(self.pgid)
                return


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid:  # fields: state, ppid, pgrp, ...
            pids.append(int(entry.name))
    return pids


def _rss_pages(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
