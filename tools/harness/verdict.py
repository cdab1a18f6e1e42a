"""The verdict schema: what an evaluation returns. Standard library only (runs on bare GPU boxes).

The field names and check names are a contract (`kernelgraph evaluate --json`); later issues
and outside tools depend on them exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Statuses, from best to worst. Exit code 0 for PASSED, 1 for the rest.
PASSED = "passed"
COMPILE_ERROR = "compile_error"
INCORRECT = "incorrect"
REJECTED = "rejected"
TIMEOUT = "timeout"
CRASHED = "crashed"
STATUSES = (PASSED, COMPILE_ERROR, INCORRECT, REJECTED, TIMEOUT, CRASHED)


class CheckName:
    """Stable check names. A failing check of each kind maps to the status beside it."""

    STATIC_PYTHON = "static_python"  # rejected
    STATIC_NATIVE = "static_native"  # rejected
    COMPILE = "compile"  # compile_error
    RUNS = "runs"  # crashed / timeout: the candidate process finished its work
    KERNEL_LAUNCHED = "kernel_launched"  # rejected
    ATEN_OPS = "aten_ops"  # rejected
    OUTPUT_TYPE = "output_type"  # rejected
    OUTPUT_SHAPE = "output_shape"  # incorrect
    CORRECTNESS = "correctness"  # incorrect
    BUFFER_UPDATES = "buffer_updates"  # incorrect: buffers forward updates, e.g. running stats
    INPUTS_UNMODIFIED = "inputs_unmodified"  # rejected
    OUTPUT_NOT_ALIASED = "output_not_aliased"  # rejected
    NON_CONSTANT_OUTPUT = "non_constant_output"  # rejected
    NO_SIDE_STREAM = "no_side_stream"  # rejected
    POST_TIMING_OUTPUT = "post_timing_output"  # rejected: outputs re-checked after timing
    TIMING_CONSISTENT = "timing_consistent"  # rejected: claimed times vs parent's wall clock


REJECTING_CHECKS = {
    CheckName.STATIC_PYTHON,
    CheckName.STATIC_NATIVE,
    CheckName.KERNEL_LAUNCHED,
    CheckName.ATEN_OPS,
    CheckName.OUTPUT_TYPE,
    CheckName.INPUTS_UNMODIFIED,
    CheckName.OUTPUT_NOT_ALIASED,
    CheckName.NON_CONSTANT_OUTPUT,
    CheckName.NO_SIDE_STREAM,
    CheckName.POST_TIMING_OUTPUT,
    CheckName.TIMING_CONSISTENT,
}
INCORRECT_CHECKS = {CheckName.CORRECTNESS, CheckName.OUTPUT_SHAPE, CheckName.BUFFER_UPDATES}


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class Failure:
    check: str
    message: str
    seed: int | None = None
    shape: list[int] | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatches: int | None = None


@dataclass
class Timing:
    kernel_ms: float | None = None
    eager_ms: float | None = None
    torch_compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    spread_pct: float | None = None
    stable: bool | None = None
    iterations: int | None = None
    timer: str | None = None  # "cuda_events" or "wall_clock" or "interpreter (not meaningful)"
    baseline_cached: bool = False  # eager/compile times come from the task's reference store


@dataclass
class Verdict:
    status: str
    message: str
    dsl: str
    device: str
    policy: str
    precision: str
    checks: list[Check] = field(default_factory=list)
    failure: Failure | None = None
    timing: Timing = field(default_factory=Timing)
    sol_pct: float | None = None
    sol: dict[str, Any] = field(default_factory=dict)
    extra_shapes: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    isolation: dict[str, Any] = field(default_factory=dict)
    cache_key: str = ""
    cached: bool = False
    phases_s: dict[str, float] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)  # peak host and device bytes per worker
    reference: dict[str, Any] = field(default_factory=dict)  # {stored, cached, build_s}

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}; expected one of {STATUSES}")

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        data = dict(data)
        data["checks"] = [Check(**c) for c in data.get("checks", [])]
        data["failure"] = Failure(**data["failure"]) if data.get("failure") else None
        data["timing"] = Timing(**data.get("timing") or {})
        return cls(**data)


def status_for_failed_check(name: str) -> str:
    if name in REJECTING_CHECKS:
        return REJECTED
    if name in INCORRECT_CHECKS:
        return INCORRECT
    if name == CheckName.COMPILE:
        return COMPILE_ERROR
    return CRASHED


class TaskError(Exception):
    """The task (not the candidate) is invalid or cannot run: exit code 2, never `crashed`."""


class UsageError(Exception):
    """Bad command-line usage or harness configuration: exit code 2."""


class HarnessError(Exception):
    """The machine failed us, not the task or the candidate: a worker that could not start, or
    was killed from outside (the system's OOM killer), even after a retry. Resumable."""
