"""Disk that reference builds under way will still write. Standard library only.

Several runs on one machine build references at once: each checks the free disk before writing
its inputs and outputs, and without claims every one of them sees the same free space (two
KernelBench problems of 13 and 8 GB per seed filled a 64 GB disk that way). A build claims the
bytes it will write in `claims/KEY.json` beside the store's entries and holds an flock on that
file until its process ends; a check counts the unwritten part of every live claim as used.
A claim whose process died holds no lock and counts nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

_HELD: list = []  # this process's claim files, open (and locked) until it exits


def store_root(inputs_dir: Path) -> Path | None:
    """The reference store holding an entry's inputs folder (refs/inputs/KEY), if it is one."""
    return inputs_dir.parent.parent if inputs_dir.parent.name == "inputs" else None


@contextlib.contextmanager
def _serialised(claims: Path):
    """One check-and-claim at a time, so two builds cannot both see the same free disk."""
    with open(claims / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _written(root: Path, key: str) -> int:
    total = 0
    for folder in (root / "inputs" / key, root / "expected" / key):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            with contextlib.suppress(OSError):
                total += entry.stat().st_size
    return total


def _live(path: Path) -> bool:
    """Whether the claim's builder still runs (it holds the file's lock)."""
    try:
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        pass
    return False


def pending_bytes(root: Path, exclude: str) -> int:
    """Bytes that other live builds have claimed and not written yet."""
    total = 0
    for path in (root / "claims").glob("*.json"):
        if path.stem == exclude:
            continue
        if not _live(path):  # its builder died; under the claims lock no new one is starting
            path.unlink(missing_ok=True)
            continue
        try:
            claimed = int(json.loads(path.read_text())["bytes"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        total += max(claimed - _written(root, path.stem), 0)
    return total


def check_and_claim(inputs_dir: Path, needed: int, check) -> None:
    """`check(free_bytes)` with the disk that other builds will still write counted as used,
    then a claim of `needed` bytes for this entry, held until this process ends."""
    root = store_root(inputs_dir)
    stats = os.statvfs(inputs_dir)
    free = stats.f_bavail * stats.f_frsize
    if root is None:  # an evaluation's own folder: nothing shared to claim against
        check(free)
        return
    claims = root / "claims"
    claims.mkdir(parents=True, exist_ok=True)
    key = inputs_dir.name
    with _serialised(claims):
        check(free - pending_bytes(root, key))
        handle = open(claims / f"{key}.json", "w")  # noqa: SIM115 - kept open: the lock is the claim
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps({"bytes": int(needed)}))
        handle.flush()
        _HELD.append(handle)
