"""Memory limits and the device-memory preflight. Standard library and torch only.

Host: each worker may use a fraction of the memory the machine has available (never a fixed
figure), or what `--max-host-memory` says. Device: before a reference is built, its peak and the
candidate's are estimated from the task's tensor sizes; a task that cannot fit is refused with
what it needs and how to shrink it.
"""

from __future__ import annotations

import os
from pathlib import Path

HOST_FRACTION = 0.6  # of MemAvailable, per worker: the OS, the parent and other workers need room
# The limit never drops below this (or below HOST_FRACTION of a smaller machine's memory): a torch
# worker with a CUDA context holds 1-2 GiB by itself, and a moment when others hold the memory
# (e.g. a reference store on tmpfs) must not read as the task's or the candidate's appetite.
HOST_FLOOR_BYTES = 4 << 30
DEVICE_HEADROOM = 0.9  # of free device memory: allocator rounding, CUDA context, workspaces


def available_host_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_limit_bytes(max_host_gb: float | None) -> int:
    """The RSS limit of one worker: the user's figure, else a fraction of available memory,
    but at least the floor."""
    if max_host_gb is not None:
        return int(max_host_gb * 2**30)
    physical = physical_host_bytes()
    available = available_host_bytes() or physical  # not Linux: physical memory
    floor = min(HOST_FLOOR_BYTES, int(physical * HOST_FRACTION))
    return max(int(available * HOST_FRACTION), floor)


def physical_host_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def over_host_limit(peak_bytes: int, limit_bytes: int) -> str:
    """Words for a worker stopped at its host-memory limit."""
    return (
        f"peak RSS {peak_bytes / 2**30:.1f} GiB, over its limit of {limit_bytes / 2**30:.1f} GiB: "
        f"{HOST_FRACTION:.0%} of the memory available when the evaluation began, or "
        f"--max-host-memory"
    )


def peak_device_estimate(meta: dict) -> int | None:
    """Bytes the busiest worker holds at once: the candidate, with the parameters, a timing
    pool of two input sets plus the live set, its outputs and a snapshot of them, and as much
    again as its outputs for intermediates. The reference and the judge hold less."""
    inputs, outputs = meta.get("input_bytes"), meta.get("output_bytes")
    if inputs is None or outputs is None:
        return None
    return meta.get("param_bytes", 0) + 3 * inputs + 3 * outputs


class DeviceBusy(Exception):
    """The task would fit the machine, but others hold the device memory or the disk it needs:
    the machine's problem, not the task's (the harness retries, then reports a resumable
    harness error). `disk_bytes`: the disk the reference store must have free."""

    def __init__(self, message: str, disk_bytes: int = 0) -> None:
        super().__init__(message)
        self.disk_bytes = disk_bytes


def check_fits(meta: dict, device: str, task) -> None:
    """Refuse a task whose estimated peak exceeds the device's free memory."""
    from kernelgraph.tools.harness.verdict import TaskError

    needed = peak_device_estimate(meta)
    free = free_device_bytes(device)
    if not needed or not free or needed <= DEVICE_HEADROOM * free:
        return
    total = total_device_bytes(device)
    where = "host memory" if device == "cpu" else device
    if total and needed <= DEVICE_HEADROOM * total:
        raise DeviceBusy(
            f"the task needs about {needed / 2**30:.1f} GiB on {where} and would fit, but other "
            f"processes hold all but {free / 2**30:.1f} GiB of its {total / 2**30:.1f} GiB. "
            f"Run fewer jobs on this device at once"
        )
    constants = ", ".join(f"{k}={v!r}" for k, v in task.constants.items()) or "none"
    raise TaskError(
        f"the task needs about {needed / 2**30:.1f} GiB on {where} at its peak (parameters, "
        f"a timing pool of two input sets and the live one: {meta['input_bytes'] / 2**30:.1f} "
        f"GiB each, the outputs and room for a kernel's intermediates) but only "
        f"{free / 2**30:.1f} GiB is free. Shrink it with --set, e.g. halve the largest of its "
        f"size constants ({constants})."
    )


def check_disk(meta: dict, seeds: int, folders: list[Path]) -> None:
    """The reference's inputs and outputs for every seed must fit the disk they go to, with
    what other builds under way will still write there counted as used (disk_claims.py)."""
    from kernelgraph.tools.harness.disk_claims import check_and_claim

    inputs, outputs = meta.get("input_bytes"), meta.get("output_bytes")
    if inputs is None or outputs is None:
        return
    needed = seeds * (inputs + outputs) * 1.05

    def check(free: int) -> None:
        if needed > free:
            raise DeviceBusy(
                f"the task's reference ({seeds} seeds of inputs and outputs) needs about "
                f"{needed / 2**30:.1f} GiB on the disk of {folders[0]} but "
                f"{max(free, 0) / 2**30:.1f} GiB is free once other jobs' reference builds "
                f"under way are counted, even after older reference-store entries were removed. "
                f"Free some disk, run fewer jobs at once, point KERNELGRAPH_CACHE_DIR at a larger "
                f"disk, or use --no-cache",
                disk_bytes=int(needed),
            )

    check_and_claim(folders[0], int(needed), check)


def free_device_bytes(device: str) -> int | None:
    if device == "cuda":
        import torch

        return torch.cuda.mem_get_info()[0]
    return available_host_bytes()


def total_device_bytes(device: str) -> int | None:
    if device == "cuda":
        import torch

        return torch.cuda.mem_get_info()[1]
    return None  # on the host, what others hold is not ours to count


def device_peak_bytes(device: str) -> int | None:
    if device != "cuda":
        return None
    import torch

    return int(torch.cuda.max_memory_allocated())


def release(device: str) -> None:
    """Give freed blocks back, so the next seed (or another process) can have them."""
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()
