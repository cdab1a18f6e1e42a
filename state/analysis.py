"""The task analysis as a typed model, for the graph's nodes.

The analysis is made by a sandboxed harness worker as a plain dict (tools/analysis/, which runs on
bare GPU boxes without pydantic; its __init__ documents the schema). This model mirrors that dict
and allows extra keys, so a newer analysis still validates here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ValueSpec(_Open):
    """A forward input or output: a tensor's shape and dtype, or a non-tensor's repr."""

    shape: list[int] | None = None
    dtype: str | None = None
    value: str | None = None
    source: str | None = None  # outputs: data-flow label of what computed it
    stage: int | None = None  # outputs: the stage that computed it

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None


class ParameterSpec(_Open):
    name: str
    shape: list[int]
    dtype: str
    buffer: bool = False


class OpRecord(_Open):
    """One ATen op the forward ran."""

    op: str  # "aten.addmm"
    kind: str  # tools.analysis.ops.KINDS
    overload: str = "default"
    shape: list[int] | None = None
    dtype: str | None = None
    args: str = ""
    reads: list[str] = Field(default_factory=list)
    arg_shapes: list[list[int]] = Field(default_factory=list)
    flops: int = 0
    composite: str | None = None
    composite_kind: str | None = None
    group: int | None = None
    state: bool = False


class StageSpec(_Open):
    """Consecutive ops that one kernel could compute (tools.analysis.ops.build_stages)."""

    kind: str
    ops: list[int]
    anchor: int | None = None
    prologue: list[int] = Field(default_factory=list)
    epilogue: list[int] = Field(default_factory=list)
    composite: str | None = None
    shape: list[int] | None = None
    dtype: str | None = None
    flops: int = 0
    reads: list[str] = Field(default_factory=list)


class TaskAnalysis(_Open):
    version: str = ""
    device: str = ""
    constants: dict[str, Any] = Field(default_factory=dict)
    inputs: list[ValueSpec] = Field(default_factory=list)
    init_inputs: list[str] = Field(default_factory=list)
    outputs: list[ValueSpec] = Field(default_factory=list)
    parameters: list[ParameterSpec] = Field(default_factory=list)
    training: bool | None = None
    ops: list[OpRecord] = Field(default_factory=list)
    ops_total: int = 0
    stages: list[StageSpec] = Field(default_factory=list)
    fx_graph: str | None = None
    fx_error: str | None = None
    trace: str | None = None
    traced_on: str | None = None
    trace_error: str | None = None
    flops: int | None = None
    min_bytes: int | None = None
    intensity: float | None = None
    sol: dict[str, Any] | None = None
    bound: Literal["memory", "compute"] | None = None
    dtypes: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def sol_ms(self) -> float | None:
        return (self.sol or {}).get("sol_ms")

    def stage_kinds(self) -> list[str]:
        return [stage.kind for stage in self.stages]


def validate_analysis(data: dict[str, Any]) -> TaskAnalysis:
    """A TaskAnalysis from analyze_task's dict (or its stored JSON); raises on bad data."""
    return TaskAnalysis.model_validate(data)
