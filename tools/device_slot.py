"""One exclusive timing slot per device, across processes (an flock in the cache directory).

Profiling takes the slot exclusively, so no other evaluation on the same device runs while a
kernel is timed; verification shares it, so verifications run side by side but never while
something is being timed.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
from collections.abc import Iterator

from tools.harness.cache import cache_root


@contextlib.contextmanager
def device_slot(device: str, exclusive: bool) -> Iterator[None]:
    slots = cache_root() / "slots"
    slots.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    with open(slots / f"{name}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
