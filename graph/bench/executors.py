"""Where bench jobs run: `jobs` workers per GPU of this box (`local`), or as many Ray actors
per GPU of a cluster (`ray`). A worker runs one job at a time; every job is its own
`kernelgraph run` process. Runs sharing a GPU time in its one timing slot, and the local
executor's workers of a GPU share a memory budget (`capacities`, memory_gate.py).

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
from kernelgraph.graph.bench.memory_gate import gpu_memory_bytes
from kernelgraph.state.bench import SampleResult
from kernelgraph.tools.harness.verdict import UsageError


class WorkerLost(Exception):
    """The worker (not the job) failed: the job may be retried elsewhere."""


@dataclass
class ExecutorOptions:
    device: str  # cuda or cpu
    gpus: int | None = None  # None: every visible GPU
    ray_address: str | None = None
    jobs: int = 1  # runs at once per GPU; on a CPU, in all (their timings share the cores)


@dataclass
class LocalWorker:
    name: str
    env: dict[str, str]
    group: str | None = None  # the GPU whose memory it shares with its siblings

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
            count = max(1, self.options.jobs)
            return [LocalWorker(f"cpu{i}", {}) for i in range(count)]
        gpus = visible_gpus()
        if not gpus:
            raise UsageError("bench --device cuda: no GPU is visible (nvidia-smi lists none).")
        wanted = self.options.gpus or len(gpus)
        if wanted > len(gpus):
            raise UsageError(f"bench --gpus {wanted}: only {len(gpus)} GPUs are visible.")
        jobs = max(1, self.options.jobs)
        return [
            LocalWorker(
                f"gpu{gpu}" + (f".{k}" if jobs > 1 else ""),
                {"CUDA_VISIBLE_DEVICES": gpu},
                group=gpu,
            )  # fmt: skip
            for gpu in gpus[:wanted]
            for k in range(jobs)
        ]

    def capacities(self, workers: list[LocalWorker]) -> dict[str, int]:
        """Memory of each GPU that several workers share; none where a GPU has one run."""
        groups = [w.group for w in workers if w.group is not None]
        shared = {g for g in groups if groups.count(g) > 1}
        sizes = gpu_memory_bytes() if shared else {}
        return {g: sizes[g] for g in shared if g in sizes}

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
