"""A warning before a bench whose big problems would write their references to a disk together.

Each run stores its reference's inputs and outputs (`tools/harness/refstore.py`): 37-50 GB for
a 6-8 GiB KernelBench problem. Eight such runs at once on a 4-GPU box's virtual disk (about
400 MB/s of writes) stalled a level-1 bench until its runs hit their timeouts; with the store on
a tmpfs the same bench ran (benchmarks/RESULTS.md). The bench cannot tell a fast disk from a
slow one cheaply, so it names the risk and the fix, once, and goes on.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernelgraph.tools.harness.cache import cache_root

BIG_PEAK_BYTES = 8 << 30  # a run's estimated device peak from which its reference is many GB
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


def filesystem_type(path: str | Path, mounts: str = "/proc/mounts") -> str | None:
    """The type of the filesystem holding `path` (the longest mount point above it)."""
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return None
    target, best, kind = os.path.realpath(path), "", None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


def reference_store_note(peaks: list[int | None], runs_at_once: int) -> str | None:
    """What to tell the user when several big problems may write to a disk-backed store at
    once; None when the store is in memory, or too few big runs share the machine."""
    big = sum(1 for peak in peaks if peak is not None and peak >= BIG_PEAK_BYTES)
    if runs_at_once < 4 or big < 2:
        return None
    store = cache_root() / "refs"
    kind = filesystem_type(store)
    if kind in MEMORY_FILESYSTEMS:
        return None
    return (
        f"{big} problems need {BIG_PEAK_BYTES >> 30} GiB or more of device memory and up to "
        f"{runs_at_once} runs go at once: each writes a reference of tens of GB to {store} "
        f"({kind or 'unknown filesystem'}). On a slow disk that stalls the bench; where the "
        f"machine has the memory, set KERNELGRAPH_CACHE_DIR to a tmpfs such as /dev/shm/kernelgraph."
    )
