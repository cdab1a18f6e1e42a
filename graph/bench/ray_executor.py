"""Bench jobs on a Ray cluster: one actor per GPU (`num_gpus=1`, so Ray sets each actor's
CUDA_VISIBLE_DEVICES), or `jobs` actors per GPU (`num_gpus=1/jobs`), each running one job at a
time as a `kernelgraph run` process on its node; runs sharing a GPU wait for its memory in the
harness (no memory gate here). An actor that dies is restarted by Ray; the job it held is retried by the scheduler,
resuming the run it had started (the run store stays the one record).

The bench folder and its run store must be at the same path on every node (a shared file
system): a job's run writes them. On one box that always holds.
"""

from __future__ import annotations

import os

from kernelgraph import IMPORT_ROOT
from kernelgraph.graph.bench.executors import ExecutorOptions, WorkerLost
from kernelgraph.graph.bench.job import Job, execute
from kernelgraph.state.bench import SampleResult
from kernelgraph.tools.harness.verdict import UsageError

ACTOR_RESTARTS = 3


def _ray():
    try:
        import ray
    except ImportError as exc:
        raise UsageError(
            "bench --ray needs Ray: pip install 'kernelgraph[ray]' (or pip install ray)."
        ) from exc
    return ray


def _pythonpath() -> str:
    """kernelgraph's root first, then the driver's own path (where Ray itself may live)."""
    return os.pathsep.join(filter(None, [IMPORT_ROOT, os.environ.get("PYTHONPATH")]))


class _Runner:
    """The actor's body: runs a job in this node's process tree."""

    def run(self, job: dict, worker: str) -> dict:
        return execute(Job(**job), worker).model_dump()

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()[:8]


class RayWorker:
    def __init__(self, ray, actor, name: str) -> None:
        self.ray, self.actor, self.name = ray, actor, name

    def run(self, job: Job) -> SampleResult:
        try:
            data = self.ray.get(self.actor.run.remote(job.to_dict(), self.name))
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError) as exc:
            raise WorkerLost(f"{self.name}: {type(exc).__name__}") from exc
        return SampleResult.model_validate(data)


class RayExecutor:
    name = "ray"

    def __init__(self, options: ExecutorOptions) -> None:
        self.ray = _ray()
        self.options = options
        address = None if options.ray_address in ("local", "") else options.ray_address
        try:
            self.ray.init(
                address=address,
                ignore_reinit_error=True,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": _pythonpath()}},
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(f"bench --ray {options.ray_address}: cannot join: {exc}") from exc

    def workers(self) -> list[RayWorker]:
        cuda = self.options.device.startswith("cuda")
        total = int(self.ray.cluster_resources().get("GPU", 0)) if cuda else 0
        if cuda and not total:
            raise UsageError("bench --ray: the cluster has no GPU.")
        jobs = max(1, self.options.jobs)
        gpus = (self.options.gpus or total) if cuda else 0
        if cuda and gpus > total:
            raise UsageError(f"bench --gpus {gpus}: the Ray cluster has {total} GPUs.")
        count = gpus * jobs if cuda else jobs
        actor_class = self.ray.remote(
            num_gpus=1 / jobs if cuda else 0, max_restarts=ACTOR_RESTARTS
        )(_Runner)
        actors = [actor_class.remote() for _ in range(count)]
        nodes = self.ray.get([a.node.remote() for a in actors])
        kind = "gpu" if cuda else "cpu"
        pairs = enumerate(zip(actors, nodes, strict=True))
        return [RayWorker(self.ray, a, f"ray:{node}:{kind}{i}") for i, (a, node) in pairs]

    def close(self) -> None:
        self.ray.shutdown()
