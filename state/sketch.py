"""The planner's Plan and the sketch-writer's Sketch: structured, DSL-neutral plans.

The LLM writes them as JSON against these schemas (structured output), and the builtin model
builds the same objects from its analysis. Both are stored as JSON blobs in the run store; the
graph state holds only their hashes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Plan(BaseModel):
    """What to build: the strategy chosen from the task analysis."""

    model_config = ConfigDict(extra="ignore")

    summary: str = Field(description="One or two sentences: what the operator computes.")
    bound: Literal["memory", "compute", "unknown"] = Field(
        "unknown", description="Whether the best kernel is limited by memory or by compute."
    )
    fuse: list[str] = Field(
        default_factory=list, description="Groups of ops to fuse into one kernel each."
    )
    kernels: list[str] = Field(
        default_factory=list, description="The kernels to write, one line each."
    )
    library_calls: list[str] = Field(
        default_factory=list,
        description="Ops left to a library call (only allowed under the hybrid policy).",
    )
    risks: list[str] = Field(
        default_factory=list, description="Numerical or performance pitfalls to watch."
    )


class Tunable(BaseModel):
    name: str = Field(description="Parameter name, e.g. BLOCK_M.")
    values: list[int | float | str] = Field(description="Candidate values to try.")
    default: int | float | str | None = Field(None, description="The value to start with.")


class Stage(BaseModel):
    name: str
    description: str


class Sketch(BaseModel):
    """A DSL-neutral kernel plan: stages, parallelism, tiling, memory, reduction, precision."""

    model_config = ConfigDict(extra="ignore")

    stages: list[Stage] = Field(description="Ordered stages of the computation.")
    parallel_axes: list[str] = Field(
        default_factory=list, description="Axes mapped to parallel programs / threads."
    )
    grid: str = Field("", description="How the launch grid maps onto the axes.")
    tiling: list[Tunable] = Field(
        default_factory=list, description="Tunable tile sizes and launch parameters."
    )
    memory: str = Field("", description="What lives in registers, shared memory and global.")
    reduction: str = Field("", description="Reduction strategy, if any (tree, online, atomic).")
    precision: str = Field("", description="Accumulation dtype and casts.")
    pseudocode: str = Field("", description="A short pseudo-code body of the kernel.")
