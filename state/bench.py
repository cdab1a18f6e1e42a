"""Typed records of a suite benchmark (`kernelgraph bench`): its settings, its problems, one
result per (problem, sample), and the machine it ran on. The bench folder keeps them as
`bench.json` (the manifest) and `results.jsonl` (one `SampleResult` per line, appended)."""

from __future__ import annotations

from pydantic import BaseModel, Field

MANIFEST_VERSION = 1


class BenchProblem(BaseModel):
    name: str  # unique within the bench: "level1/23_Softmax", or the file's stem
    path: str  # absolute path of the task file
    level: str | None = None  # "level1" ... for a KernelBench layout
    category: str = "other"  # op family (tools/task_category.py)


class BenchSettings(BaseModel):
    """What every problem's run was given; `run_args` is the exact `kernelgraph run` tail."""

    suite: str
    only: list[str] = Field(default_factory=list)
    dsl: str
    device: str
    model: str
    policy: str = "strict"
    precision: str = "fp32"
    max_iterations: int = 12
    samples: int = 1
    task_timeout_s: float | None = None
    run_args: list[str] = Field(default_factory=list)


class BenchEnvironment(BaseModel):
    host: str = ""
    device_name: str = ""  # "NVIDIA H100 80GB HBM3", or the CPU model
    devices: int = 0  # GPUs (or CPU workers) used
    driver: str | None = None
    cuda: str | None = None
    torch: str = ""
    triton: str | None = None
    kernelgraph: str = ""
    executor: str = "local"  # local or ray


class BenchManifest(BaseModel):
    version: int = MANIFEST_VERSION
    created_at: str
    db: str  # the run store every problem's run is in
    settings: BenchSettings
    problems: list[BenchProblem]
    environment: BenchEnvironment = Field(default_factory=BenchEnvironment)


class SampleResult(BaseModel):
    """One run of one problem. `status` is the run's (verified, no_verified_kernel, task_error,
    interrupted, awaiting_approval), or `timeout` (the bench's per-problem cap stopped it) or
    `crashed` (the run's process died without a summary)."""

    problem: str
    sample: int = 0
    run_id: str | None = None
    status: str
    stop_reason: str | None = None
    exit_code: int | None = None
    verified: bool = False
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    sol_pct: float | None = None
    kernel_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    flops: int | None = None  # of the reference, for the roofline
    bytes: int | None = None  # minimum bytes moved by the reference
    bound: str | None = None  # compute or memory, at speed-of-light
    peak_flops: float | None = None  # the device's, as the speed-of-light used it (FLOP/s)
    peak_bandwidth: float | None = None  # bytes/s
    wall_s: float = 0.0
    first_verified_s: float | None = None  # from the run's start to its first passed check
    candidates: int = 0
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    usd: float | None = 0.0
    worker: str | None = None  # "gpu0", "cpu", "ray:<node>:gpu0"
    cached: bool = False  # the best kernel's verdict or timing came from a cache
    message: str = ""


FAST_P = (0.0, 1.0, 1.5, 2.0)  # KernelBench's fast_p thresholds


class GroupMetrics(BaseModel):
    """KernelBench's figures over a group of problems (the whole bench, a level, a category).
    A problem counts once, by its best sample (the fastest verified one, else its first)."""

    problems: int = 0
    verified: int = 0
    correctness_rate: float = 0.0  # verified / problems
    # fast_p: the fraction of *all* problems that are verified and faster than p x the baseline
    fast_p_eager: dict[str, float] = Field(default_factory=dict)  # keys "0", "1", "1.5", "2"
    fast_p_compile: dict[str, float] = Field(default_factory=dict)
    geomean_eager_verified: float | None = None  # over verified problems with a timing
    geomean_eager_all: float | None = None  # an unsolved problem counted as 1.0x
    geomean_compile_verified: float | None = None
    geomean_compile_all: float | None = None
    sol_pct_median: float | None = None


class BenchSummary(BaseModel):
    overall: GroupMetrics
    by_level: dict[str, GroupMetrics] = Field(default_factory=dict)
    by_category: dict[str, GroupMetrics] = Field(default_factory=dict)
    pass_at_k: dict[str, float] = Field(default_factory=dict)  # "1", "K": with samples > 1
    sol_pct: list[float] = Field(default_factory=list)  # every verified best's % SOL, sorted
    finished: int = 0  # (problem, sample) pairs with a result
    expected: int = 0  # problems x samples
    wall_s: float = 0.0  # sum of the runs' wall times
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    usd: float | None = 0.0  # None when some model's price is unknown
