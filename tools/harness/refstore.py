"""The reference store: a task's inputs, reference outputs and baselines, made once per machine.

Building the reference (inputs from `get_inputs()`, the reference's outputs, the eager and
torch.compile timings) can cost more than a candidate, so it is done once per (task, sizes,
device, precision, seeds, machine fingerprint) and reused by every candidate of every run.
Inputs live where candidates may read them (mounted read-only in their sandbox); reference
outputs live in a separate tree that their sandbox hides. Where the sandbox cannot hide a folder
the store is not used: each evaluation prepares its own inputs and the judge recomputes the
reference's outputs. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgraph.tools.harness.cache import cache_root
from kernelgraph.tools.harness.config import HARNESS_VERSION, EvalConfig
from kernelgraph.tools.harness.exchange import read_json, write_json
from kernelgraph.tools.harness.machine import fingerprint

STORE_VERSION = "2"  # 2: the buffers forward updates, per seed
META = "meta.json"
BASELINES = "baselines.json"


@dataclass
class RefEntry:
    """One task's reference: `inputs_dir` (readable by candidates), `expected_dir` (never)."""

    key: str
    inputs_dir: Path
    expected_dir: Path | None  # None: the judge recomputes the reference's outputs
    persistent: bool
    lock: Any = None  # the open lock file while the entry is in use

    def meta(self) -> dict | None:
        return read_json(self.inputs_dir / META) if self.persistent else None

    def seal(self, meta: dict) -> None:
        """Mark the entry complete: written last, so a half-built entry is never used."""
        if self.persistent:
            write_json(self.inputs_dir / META, meta)
            fcntl.flock(self.lock, fcntl.LOCK_SH)  # built: others may use it alongside us

    def baselines(self) -> dict:
        return (read_json(self.inputs_dir / BASELINES) or {}) if self.persistent else {}

    def add_baselines(self, measured: dict) -> None:
        if self.persistent and measured:
            write_json(self.inputs_dir / BASELINES, {**self.baselines(), **measured})

    def reset(self) -> None:
        for folder in (self.inputs_dir, self.expected_dir):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True, exist_ok=True)


def store_key(task_hash: str, config: EvalConfig, seeds: list[int]) -> str:
    material = {
        "task": task_hash,
        "device": config.device,
        "precision": config.precision,
        "threads": config.threads,
        "seeds": seeds,
        "machine": fingerprint(config.device),
        "versions": [STORE_VERSION, HARNESS_VERSION],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


class ReferenceStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_root() / "refs"
        self.inputs_root = self.root / "inputs"
        self.expected_root = self.root / "expected"
        self.locks = self.root / "locks"
        for folder in (self.inputs_root, self.expected_root, self.locks):
            folder.mkdir(parents=True, exist_ok=True)

    def entry(self, key: str) -> RefEntry:
        return RefEntry(key, self.inputs_root / key, self.expected_root / key, True)

    @contextlib.contextmanager
    def using(self, key: str) -> Iterator[RefEntry]:
        """The entry, complete, under a shared lock (eviction waits for it to be released).
        The caller builds it when `meta()` is None, having been given the exclusive lock."""
        entry = self.entry(key)
        with open(self.locks / f"{key}.lock", "a+") as lock:
            entry.lock = lock
            fcntl.flock(lock, fcntl.LOCK_SH)
            if entry.meta() is None:  # build under an exclusive lock; one builder at a time
                fcntl.flock(lock, fcntl.LOCK_EX)
                if entry.meta() is None:
                    entry.reset()
            os.utime(lock.name)  # recency, for eviction
            try:
                yield entry
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def evict(self, keep: str, budget_bytes: int) -> list[str]:
        """Remove least recently used entries (not in use, not `keep`) until under budget."""
        entries = sorted(self.locks.glob("*.lock"), key=lambda p: p.stat().st_mtime)
        sizes = {p.stem: self._size(p.stem) for p in entries}
        entries = [p for p in entries if sizes[p.stem]]  # evicted before: nothing to remove
        total, removed = sum(sizes.values()), []
        for lock_path in entries:
            key = lock_path.stem
            if total <= budget_bytes:
                break
            if key == keep:
                continue
            with open(lock_path, "a+") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # in use by another evaluation
                entry = self.entry(key)
                shutil.rmtree(entry.inputs_dir, ignore_errors=True)
                shutil.rmtree(entry.expected_dir, ignore_errors=True)
                # The lock file stays (a few bytes): unlinked, a builder already waiting on it
                # would lock a file no later opener sees, and another eviction or build could
                # then take the entry from under it.
            total -= sizes[key]
            removed.append(key)
        return removed

    def make_room(self, keep: str, disk_bytes: int) -> list[str]:
        """Evict unused entries until the store's disk has `disk_bytes` free, or none is left."""
        stats = os.statvfs(self.root)
        short = disk_bytes - stats.f_bavail * stats.f_frsize
        if short <= 0:
            return []
        held = sum(self._size(p.stem) for p in self.locks.glob("*.lock"))
        return self.evict(keep, max(held - short, 0))

    def _size(self, key: str) -> int:
        """Bytes an entry holds; files that vanish meanwhile (renamed, evicted) count 0."""
        entry = self.entry(key)
        total = 0
        for folder in (entry.inputs_dir, entry.expected_dir):
            try:
                files = list(os.scandir(folder))
            except OSError:
                continue
            for f in files:
                try:
                    total += f.stat().st_size
                except OSError:
                    pass
        return total

    def budget_bytes(self) -> int:
        """KERNELGRAPH_REF_STORE_GB, else half the free disk (counting what the store holds)."""
        override = os.environ.get("KERNELGRAPH_REF_STORE_GB")
        if override:
            return int(float(override) * 2**30)
        stats = os.statvfs(self.root)
        held = sum(self._size(p.stem) for p in self.locks.glob("*.lock"))
        return int((stats.f_bavail * stats.f_frsize + held) * 0.5)


def ephemeral_entry(work_dir: Path) -> RefEntry:
    """Inputs for one evaluation only, and no stored reference outputs."""
    inputs_dir = work_dir / "reference"
    inputs_dir.mkdir(parents=True, exist_ok=True)
    return RefEntry("ephemeral-" + str(time.time_ns()), inputs_dir, None, False)
