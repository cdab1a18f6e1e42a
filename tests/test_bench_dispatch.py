"""The bench's scheduling, without runs: which jobs a bench still owes after a kill, and how
jobs go to workers when a worker dies (the Ray case) — with fake workers, a real run store."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgraph.graph.bench.executors import WorkerLost
from kernelgraph.graph.bench.job import Job
from kernelgraph.graph.bench.scheduler import Dispatcher, plan
from kernelgraph.state.bench import BenchManifest, BenchProblem, BenchSettings, SampleResult
from kernelgraph.state.store import open_store


def manifest(names: list[str], samples: int = 1) -> BenchManifest:
    problems = [BenchProblem(name=n, path=f"/suite/{n}.py") for n in names]
    settings = BenchSettings(suite="/suite", dsl="cpp", device="cpu", model="builtin",
                             samples=samples, run_args=["--dsl", "cpp"])  # fmt: skip
    return BenchManifest(created_at="now", db="db", settings=settings, problems=problems)


def store_run(db: Path, status: str) -> str:
    with open_store(db) as store:
        run_id = store.create_run(kind="run", task_path="t.py", task_hash="h", dsl="cpp",
                                  device="cpu", config={})  # fmt: skip
        store.update_run(run_id, status=status)
    return run_id


def test_a_resumed_bench_skips_finished_jobs_reads_back_finished_runs_and_resumes_the_rest(
    tmp_path: Path,
) -> None:
    db = tmp_path / "kg.db"
    done, finished_while_down = store_run(db, "verified"), store_run(db, "no_verified_kernel")
    interrupted = store_run(db, "interrupted")
    bench = manifest(["a", "b", "c", "d", "e"])
    results = [
        SampleResult(problem="a", status="verified", run_id=done),
        SampleResult(problem="e", status="crashed"),  # not final: run again
    ]
    started = {("a", 0): done, ("b", 0): finished_while_down, ("c", 0): interrupted}
    owed = plan(bench, tmp_path, db, results, started)
    assert owed.done == 1
    assert [(r.problem, r.status, r.run_id) for r in owed.recovered] == [
        ("b", "no_verified_kernel", finished_while_down)
    ]
    jobs = {job.problem["name"]: job for job in owed.jobs}
    assert sorted(jobs) == ["c", "d", "e"]
    assert jobs["c"].resume_run_id == interrupted  # continued, not started afresh
    assert jobs["d"].resume_run_id is None and jobs["e"].resume_run_id is None
    assert jobs["d"].run_args == ["--dsl", "cpp"]


def test_every_sample_is_a_job(tmp_path: Path) -> None:
    owed = plan(manifest(["a", "b"], samples=3), tmp_path, tmp_path / "kg.db", [], {})
    assert sorted((j.problem["name"], j.sample) for j in owed.jobs) == [
        (n, s) for n in "ab" for s in range(3)
    ]


class FakeWorker:
    """Runs jobs instantly; `lose` lists the attempts (1-based, over all jobs) that die."""

    def __init__(self, name: str, lose: set[int] | None = None, always_lost: bool = False):
        self.name, self.lose, self.always_lost = name, lose or set(), always_lost
        self.calls: list[Job] = []

    def run(self, job: Job) -> SampleResult:
        self.calls.append(job)
        if self.always_lost or len(self.calls) in self.lose:
            raise WorkerLost(f"{self.name} died")
        return SampleResult(problem=job.problem["name"], sample=job.sample, status="verified",
                            worker=self.name, run_id=job.resume_run_id)  # fmt: skip


def jobs(names: list[str]) -> list[Job]:
    return [Job(problem={"name": n, "path": n}, sample=0, run_args=[], db="db", folder="f")
            for n in names]  # fmt: skip


def dispatch(workers, names, started=None):
    results = []
    dispatcher = Dispatcher(workers, lambda job, worker: None, results.append,
                            lambda job: (started or {}).get(job.problem["name"]))  # fmt: skip
    dispatcher.run(jobs(names))
    return results


def test_each_job_runs_once_over_all_workers() -> None:
    workers = [FakeWorker("gpu0"), FakeWorker("gpu1")]
    results = dispatch(workers, [f"p{i}" for i in range(6)])
    assert sorted(r.problem for r in results) == [f"p{i}" for i in range(6)]
    assert sum(len(w.calls) for w in workers) == 6


def test_a_job_whose_worker_died_is_retried_resuming_its_run() -> None:
    flaky = FakeWorker("gpu0", lose={1})
    results = dispatch([flaky], ["p0"], started={"p0": "r-started"})
    assert [(r.problem, r.status, r.run_id) for r in results] == [("p0", "verified", "r-started")]
    assert [c.resume_run_id for c in flaky.calls] == [None, "r-started"]


def test_a_dead_worker_retires_and_the_others_take_its_jobs() -> None:
    dead, good = FakeWorker("gpu0", always_lost=True), FakeWorker("gpu1")
    results = dispatch([dead, good], [f"p{i}" for i in range(4)])
    assert sorted((r.problem, r.status) for r in results) == [
        (f"p{i}", "verified") for i in range(4)
    ]
    assert len(dead.calls) == 2  # lost twice in a row: retired


@pytest.mark.parametrize("count", [1, 2])
def test_with_every_worker_lost_the_jobs_end_as_crashed_naming_why(count: int) -> None:
    workers = [FakeWorker(f"gpu{i}", always_lost=True) for i in range(count)]
    results = dispatch(workers, ["p0", "p1"])
    assert sorted(r.problem for r in results) == ["p0", "p1"]
    assert {r.status for r in results} == {"crashed"}
    assert all("lost" in r.message or "no worker" in r.message for r in results)


class Replies:
    """A worker whose runs end as given, in turn."""

    name = "gpu0"

    def __init__(self, *outcomes: dict):
        self.outcomes, self.calls = list(outcomes), []

    def run(self, job: Job) -> SampleResult:
        self.calls.append(job)
        return SampleResult(problem=job.problem["name"], sample=job.sample, **self.outcomes.pop(0))


def test_a_run_the_machine_failed_is_resumed_once_more() -> None:
    failed = {
        "status": "interrupted",
        "stop_reason": "harness_error",
        "run_id": "r-1",
        "exit_code": 3,
    }
    worker = Replies(failed, {"status": "verified", "run_id": "r-1"})
    results = []
    Dispatcher([worker], lambda j, w: None, results.append, lambda j: None,
               retry_run=lambda r: r.stop_reason == "harness_error").run(jobs(["p0"]))  # fmt: skip
    assert [r.status for r in results] == ["verified"]
    assert [c.resume_run_id for c in worker.calls] == [None, "r-1"]


@pytest.fixture
def session(tmp_path: Path):
    from kernelgraph.graph.bench.api import BenchSession
    from kernelgraph.graph.bench.progress import BenchProgress

    def make(worker) -> BenchSession:
        return BenchSession(tmp_path, [worker], BenchProgress(quiet=True))

    return make


def test_an_endpoint_outage_pauses_the_bench_and_keeps_its_run_owed(session, tmp_path: Path):
    down = {"status": "interrupted", "stop_reason": "endpoint_down", "exit_code": 3,
            "message": "gpt @ url is not answering after 5 tries"}  # fmt: skip
    worker = Replies(down, {"status": "verified"})
    bench = session(worker)
    bench.run(jobs(["p0", "p1"]))
    assert bench.paused == "gpt @ url is not answering after 5 tries"
    assert len(worker.calls) == 1  # no new run starts against a dead endpoint
    assert not (tmp_path / "results.jsonl").exists()  # owed: --resume runs it


def test_a_run_stopped_by_a_locked_database_runs_again_and_the_bench_goes_on(session, tmp_path):
    """On a loaded box a run's database can stay locked past its busy timeout (16 runs at once
    on an H100 x4 did): the CLI exits 3, the machine's fault, and the bench starts it again."""
    locked = {"status": "crashed", "stop_reason": "database_busy", "exit_code": 3,
              "message": "the run database stayed locked"}  # fmt: skip
    worker = Replies(locked, {"status": "verified", "run_id": "r-2"}, {"status": "verified"})
    bench = session(worker)
    bench.run(jobs(["p0", "p1"]))
    assert bench.refused is None and bench.paused is None
    assert [r.status for r in bench.ran] == ["verified", "verified"]
    assert sorted(c.problem["name"] for c in worker.calls) == ["p0", "p0", "p1"]  # p0 re-queued


def test_a_kernelgraph_bug_is_recorded_not_run_again(session):
    """An internal error exits 3 too, but prints no error kind: trying it again cannot help."""
    bug = {"status": "crashed", "exit_code": 3, "message": "internal error: KeyError"}
    worker = Replies(bug, {"status": "verified"})
    bench = session(worker)
    bench.run(jobs(["p0", "p1"]))
    assert sorted(r.status for r in bench.ran) == ["crashed", "verified"]
    assert len(worker.calls) == 2


@pytest.mark.parametrize("status", ["crashed", "interrupted"])
def test_a_run_that_refuses_the_options_stops_the_bench(session, tmp_path: Path, status: str):
    refused = {"status": status, "exit_code": 2, "message": "auth failed: the key was refused"}
    bench = session(Replies(refused, {"status": "verified"}))
    bench.run(jobs(["p0", "p1"]))
    assert bench.refused == "auth failed: the key was refused"
    assert bench.ran == []


class FakeRay:
    """What RayExecutor asks of Ray: init, the cluster's GPUs, actor classes and their calls."""

    def __init__(self, gpus: int) -> None:
        self.gpus, self.init_kwargs, self.actor_options = gpus, {}, {}

    def init(self, **kwargs) -> None:
        self.init_kwargs = kwargs

    def cluster_resources(self) -> dict:
        return {"GPU": float(self.gpus)}

    def remote(self, **options):
        self.actor_options = options

        class Actor:
            class node:  # noqa: N801 - Ray's `actor.method.remote()` shape
                @staticmethod
                def remote() -> str:
                    return "node0001"

            @classmethod
            def remote(cls):
                return cls()

        return lambda body: Actor

    def get(self, refs):
        return refs


@pytest.mark.parametrize("jobs, actors, share", [(1, 2, 1.0), (2, 4, 0.5)])
def test_ray_actors_share_gpus_by_jobs_and_find_ray_where_the_driver_did(
    monkeypatch, jobs, actors, share
) -> None:
    """Ray's workers get kernelgraph's root and the driver's own PYTHONPATH (on the GPU box Ray
    itself was there: with kernelgraph's root alone, no actor could start)."""
    from kernelgraph import IMPORT_ROOT
    from kernelgraph.graph.bench import ray_executor
    from kernelgraph.graph.bench.executors import ExecutorOptions

    fake = FakeRay(gpus=2)
    monkeypatch.setattr(ray_executor, "_ray", lambda: fake)
    monkeypatch.setenv("PYTHONPATH", "/opt/site")
    executor = ray_executor.RayExecutor(ExecutorOptions("cuda", ray_address="local", jobs=jobs))
    workers = executor.workers()
    assert len(workers) == actors and fake.actor_options["num_gpus"] == share
    assert fake.init_kwargs["runtime_env"]["env_vars"]["PYTHONPATH"] == f"{IMPORT_ROOT}:/opt/site"
    assert [w.name for w in workers][:2] == ["ray:node0001:gpu0", "ray:node0001:gpu1"]
