"""Typed mirrors of the harness verdict (tools/harness/verdict.py) for the graph's nodes.

The harness stays standard-library only, so its dataclasses are plain; these models validate
what comes back from a worker or from the store before the graph acts on it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tools.harness.verdict import PASSED, STATUSES


class _Model(BaseModel):
    # Unknown fields are ignored so that a newer harness's verdicts still load.
    model_config = ConfigDict(extra="ignore")


class CheckModel(_Model):
    name: str
    passed: bool
    detail: str = ""


class FailureModel(_Model):
    check: str
    message: str
    seed: int | None = None
    shape: list[int] | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatches: int | None = None


class TimingModel(_Model):
    kernel_ms: float | None = None
    eager_ms: float | None = None
    torch_compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    spread_pct: float | None = None
    stable: bool | None = None
    iterations: int | None = None
    timer: str | None = None


class EvaluationResult(_Model):
    status: str
    message: str = ""
    dsl: str = ""
    device: str = ""
    policy: str = ""
    precision: str = ""
    checks: list[CheckModel] = Field(default_factory=list)
    failure: FailureModel | None = None
    timing: TimingModel = Field(default_factory=TimingModel)
    sol_pct: float | None = None
    sol: dict[str, Any] = Field(default_factory=dict)
    extra_shapes: list[dict[str, Any]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    env: dict[str, Any] = Field(default_factory=dict)
    isolation: dict[str, Any] = Field(default_factory=dict)
    cache_key: str = ""
    cached: bool = False
    phases_s: dict[str, float] = Field(default_factory=dict)

    @field_validator("status")
    @classmethod
    def _known_status(cls, value: str) -> str:
        if value not in STATUSES:
            raise ValueError(f"unknown verdict status {value!r}; expected one of {STATUSES}")
        return value

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @classmethod
    def from_verdict(cls, verdict: dict[str, Any]) -> EvaluationResult:
        """From Verdict.to_dict() (or a stored evaluation's `verdict` JSON)."""
        return cls.model_validate(verdict)
