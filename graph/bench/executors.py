"""Where bench jobs run: one worker per GPU of this box (`local`), or one Ray actor per GPU of
a cluster (`ray`). A worker runs one job at a time; every job is its own `kernelgraph run`
process, so each GPU has one run and one timing slot at a time.

An executor is a registry entry: `EXECUTORS[name](options)` returns an object with `workers()`
(a list of `Worker`) and `close()`. A worker's `run(job)` returns a `SampleResult`, or raises
`WorkerLost` when the worker itself died (a Ray node gone): the scheduler retries that job.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from dataclasses import dataclass

from kernelgraph.graph.bench.job import Job, execute
from kernelgraph.state.bench import SampleResult
from kernelgraph.tools.harness.verdict import UsageError


class WorkerLost(Exception):
    """The worker (not the job) failed: the job may be retried elsewhere."""


@dataclass
class ExecutorOptions:
    device: str  # cuda or cpu
    gpus: int | None = None  # None: every visible GPU
    ray_address: str | None = None
    cpu_workers: int = 1  # on a CPU, runs at once (their timings share the cores)


@dataclass
class LocalWorker:
    name: str
    env: dict[str, str]

    def run(self, job: Job) -> SampleResult:
        job.env = {**job.env, **self.env}
        return execute(job, self.name)


def visible_gpus() -> list[str]:
    """This process's GPUs as CUDA_VISIBLE_DEVICES entries (indices or UUIDs)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [e.strip() for e in visible.split(",") if e.strip()]
    return [str(i) for i in range(_gpu_count())]


def _gpu_count() -> int:
    """Counted by nvidia-smi, so the bench process never creates a CUDA context of its own."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


class LocalExecutor:
    name = "local"

    def __init__(self, options: ExecutorOptions) -> None:
        self.options = options

    def workers(self) -> list[LocalWorker]:
        if not self.options.device.startswith("cuda"):
            count = max(1, self.options.cpu_workers)
            return [LocalWorker(f"cpu{i}", {}) for i in range(count)]
        gpus = visible_gpus()
        if not gpus:
            raise UsageError("bench --device cuda: no GPU is visible (nvidia-smi lists none).")
        wanted = self.options.gpus or len(gpus)
        if wanted > len(gpus):
            raise UsageError(f"bench --gpus {wanted}: only {len(gpus)} GPUs are visible.")
        return [LocalWorker(f"gpu{gpu}", {"CUDA_VISIBLE_DEVICES": gpu}) for gpu in gpus[:wanted]]

    def close(self) -> None:
        pass


# name -> "module:class"; imported on use, so that the optional `ray` extra stays optional
EXECUTORS = {
    "local": "kernelgraph.graph.bench.executors:LocalExecutor",
    "ray": "kernelgraph.graph.bench.ray_executor:RayExecutor",
}


def make_executor(name: str, options: ExecutorOptions):
    module, _, cls = EXECUTORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)(options)
