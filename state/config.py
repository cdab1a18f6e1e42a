"""Run configuration: everything a run needs to continue after a resume, and nothing secret.

It is stored with the run (as JSON) so that `resume` rebuilds the same run; `branch --config
KEY=VALUE` changes one field by its name (see `RunConfig.with_changes`). API keys are never
part of it: they are read from the environment when a client is made. A config stored by an
older kernelgraph lacks the newer fields: they take their defaults.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kernelgraph.state.search import SearchSettings
from kernelgraph.tools.harness.config import EvalConfig

LLM_NODES = ("planner", "sketch_writer", "coder")


class Price(BaseModel):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class ModelConfig(BaseModel):
    """Which brain answers the LLM nodes. `name` is "builtin", "script:FILE", "replay:RUN" or
    an endpoint's model name (with `base_url`)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    base_url: str | None = None
    cheap_name: str | None = None  # a cheaper tier for `cheap_nodes`
    cheap_base_url: str | None = None
    cheap_nodes: list[str] = Field(default_factory=lambda: ["planner"])
    prices: dict[str, Price] = Field(default_factory=dict)  # model name -> price
    record: bool = False
    temperature: float | None = None
    request_timeout_s: float = 300.0
    endpoint_retries: int = 4  # connection errors and rate limits, with backoff
    backoff_s: float = 2.0  # first backoff; doubles each retry
    bad_reply_retries: int = 2  # a bad reply is asked again with what was wrong

    @field_validator("cheap_nodes")
    @classmethod
    def _known_nodes(cls, nodes: list[str]) -> list[str]:
        unknown = sorted(set(nodes) - set(LLM_NODES))
        if unknown:
            raise ValueError(f"unknown LLM nodes {unknown}; choose from {list(LLM_NODES)}")
        return nodes


class Limits(BaseModel):
    """When a run stops. Every limit has a default; budgets are optional."""

    model_config = ConfigDict(extra="forbid")

    max_iterations: int = Field(12, ge=1)  # candidates written by the coder
    max_retries: int = Field(3, ge=1)  # consecutive failures before a new sketch
    max_escalations: int = Field(2, ge=0)  # new sketches after repeated failure
    plateau_patience: int = Field(3, ge=1)  # profiled candidates without a real gain
    min_gain_pct: float = Field(2.0, ge=0)  # what counts as a real gain
    sol_target_pct: float = Field(90.0, gt=0)  # near speed-of-light: stop refining
    budget_usd: float | None = Field(None, gt=0)
    max_llm_calls: int | None = Field(None, ge=1)
    max_minutes: float | None = Field(None, gt=0)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_path: str
    sets: dict[str, Any] = Field(default_factory=dict)
    dsl: str
    device: str = "cpu"
    seeds: int = Field(3, ge=1)
    precision: str = "fp32"
    policy: str = "strict"
    timeout_s: float = Field(300.0, gt=0)
    threads: int = 0
    max_host_gb: float | None = Field(None, gt=0)  # per harness worker; None: the harness decides
    share_weights: bool = False  # ModelNew gets the reference's weights (not KernelBench's way)
    baseline_compile: bool = False
    no_cache: bool = False  # evaluate and analyse afresh: nothing cached by earlier runs is read
    prebuild: int = Field(2, ge=0)  # configurations compile-checked ahead in parallel (GPU)
    approve: bool = False
    model: ModelConfig = Field(default_factory=ModelConfig)
    limits: Limits = Field(default_factory=Limits)
    search: SearchSettings = Field(default_factory=SearchSettings)

    def eval_config(self, profile: bool) -> EvalConfig:
        return EvalConfig(
            dsl=self.dsl,
            device=self.device,
            seeds=self.seeds,
            sets=dict(self.sets),
            precision=self.precision,
            policy=self.policy,
            baseline_compile=self.baseline_compile and profile,
            profile=profile,
            timeout_s=self.timeout_s,
            threads=self.threads,
            max_host_gb=self.max_host_gb,
            share_weights=self.share_weights,
        )

    def with_changes(self, changes: dict[str, Any]) -> RunConfig:
        """A copy with fields changed by name: top-level ("dsl"), a limit ("max_iterations")
        or a model field ("model" means the model's name; "base_url", "record"...), or a search
        setting ("width", "islands", ...)."""
        data = self.model_dump()
        for key, value in changes.items():
            if key == "model":
                data["model"]["name"] = value
            elif key in data and key not in ("limits", "search"):
                data[key] = value
            elif key in Limits.model_fields:
                data["limits"][key] = value
            elif key in SearchSettings.model_fields:
                data["search"][key] = value
            elif key in ModelConfig.model_fields:
                data["model"][key] = value
            else:
                known = sorted(
                    {*data, *Limits.model_fields, *ModelConfig.model_fields,
                     *SearchSettings.model_fields} - {"limits", "search"}
                )  # fmt: skip
                raise KeyError(f"unknown setting {key!r}; known: {', '.join(known)}")
        return RunConfig.model_validate(data)
