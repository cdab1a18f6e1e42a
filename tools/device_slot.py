"""One exclusive timing slot per physical device, across processes (an flock in the cache
directory).

Profiling takes the slot exclusively, so no other evaluation on the same device runs while a
kernel is timed; verification shares it, so verifications run side by side but never while
something is being timed. The slot is named after the physical GPU, not the process's view of
it: two bench workers given `CUDA_VISIBLE_DEVICES=0` and `=1` both see `cuda:0`, yet must not
wait for each other, while two processes on the same GPU must.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator

from kernelgraph.tools.harness.cache import cache_root


def physical_device(device: str) -> str:
    """`cuda[:I]` as the machine names it: `cuda-N` with N the I-th entry of
    CUDA_VISIBLE_DEVICES (an index or a UUID) when that is set, else I; other devices as given."""
    kind, _, index = device.partition(":")
    if kind != "cuda":
        return device
    position = int(index) if index.isdigit() else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    entries = [e.strip() for e in visible.split(",") if e.strip()] if visible is not None else []
    return f"cuda-{entries[position] if position < len(entries) else position}"


@contextlib.contextmanager
def device_slot(device: str, exclusive: bool) -> Iterator[None]:
    slots = cache_root() / "slots"
    slots.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", physical_device(device))
    with open(slots / f"{name}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
