"""Several runs on one GPU (`bench --jobs N`): a job is admitted to a GPU only while the
estimated device-memory peaks of that GPU's runs fit its memory together, so a 6 GB problem
runs beside small ones but never beside another that would not fit. A job whose peak is
unknown runs alone on its GPU. Timings stay honest either way: every run on a GPU times in
that GPU's one timing slot (tools/device_slot.py).

Peaks come from `python -m kernelgraph.tools.harness.sizes`, which runs each task on meta
tensors in a child process (the bench process never runs task code or touches a GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kernelgraph import IMPORT_ROOT
from kernelgraph.tools.harness.sandbox import SECRET_MARKERS

RUN_OVERHEAD_BYTES = 2 << 30  # a run's workers' CUDA contexts and allocator slack
USABLE_SHARE = 0.9  # of a GPU's memory
SIZING_TIMEOUT_S = 600.0


class MemoryGate:
    """Admission per GPU group; the caller holds its own lock around these calls."""

    def __init__(self, capacity: dict[str, int]) -> None:
        self.capacity = {group: int(USABLE_SHARE * total) for group, total in capacity.items()}
        self.held = dict.fromkeys(capacity, 0)
        self.running = dict.fromkeys(capacity, 0)

    def need(self, group: str, peak_bytes: int | None) -> int:
        if peak_bytes is None:
            return self.capacity[group]  # unknown: alone
        return min(peak_bytes + RUN_OVERHEAD_BYTES, self.capacity[group])

    def admit(self, group: str | None, peak_bytes: int | None) -> bool:
        if group not in self.capacity:
            return True  # an ungated worker (one run per GPU, a CPU, a Ray actor)
        need = self.need(group, peak_bytes)
        if self.running[group] and self.held[group] + need > self.capacity[group]:
            return False
        self.held[group] += need
        self.running[group] += 1
        return True

    def release(self, group: str | None, peak_bytes: int | None) -> None:
        if group in self.capacity:
            self.held[group] -= self.need(group, peak_bytes)
            self.running[group] -= 1


def gpu_memory_bytes() -> dict[str, int]:
    """Total memory of each GPU, keyed by its index and its UUID (CUDA_VISIBLE_DEVICES may name
    either), from nvidia-smi: the bench process creates no CUDA context."""
    query = ["nvidia-smi", "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    sizes = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[2].isdigit():
            sizes[parts[0]] = sizes[parts[1]] = int(parts[2]) << 20
    return sizes


def estimate_peaks(paths: list[str], sets: list[str]) -> dict[str, int | None]:
    """Each task's estimated device peak in bytes (None: unknown); {} if sizing failed."""
    args = [sys.executable, "-m", "kernelgraph.tools.harness.sizes"]
    args += [f"--set={item}" for item in sets] + paths
    env = {k: v for k, v in os.environ.items() if not any(m in k.upper() for m in SECRET_MARKERS)}
    env.update(PYTHONPATH=IMPORT_ROOT, CUDA_VISIBLE_DEVICES="")
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, env=env, timeout=SIZING_TIMEOUT_S
        )
        return json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}


def gated(jobs: list, capacity: dict[str, int], run_args: list[str]) -> MemoryGate:
    """A gate over `capacity` (GPU -> bytes; empty: no GPU is shared), with each job's peak
    filled in and the biggest queued first, so that no big problem is left to run alone last."""
    if not capacity or not jobs:
        return MemoryGate({})
    sets = [run_args[i + 1] for i, arg in enumerate(run_args[:-1]) if arg == "--set"]
    peaks = estimate_peaks(sorted({job.problem["path"] for job in jobs}), sets)
    for job in jobs:
        job.peak_bytes = peaks.get(job.problem["path"])
    biggest = max(capacity.values())
    jobs.sort(key=lambda job: -(biggest if job.peak_bytes is None else job.peak_bytes))
    return MemoryGate(capacity)
