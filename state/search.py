"""The state of a parallel search (`--width N`, `--islands K`): rounds of N candidates spread
over K islands, each with its own sketch and population, and one elite archive.

Small values only, like GraphState (which SearchState extends, so the run summary, progress
and `show` read a search run as they read any run): ids, times and descriptors, never code.
"""

from __future__ import annotations

import operator
from typing import Annotated

from pydantic import BaseModel, Field

from kernelgraph.state.graph_state import Baseline, Best, GraphState, Lane, Outcome


class SearchSettings(BaseModel):
    """How wide each round is and how its islands mix. width 1 with 1 island is the plain
    six-node graph, one candidate at a time."""

    width: int = Field(1, ge=1)  # candidates per round, evaluated concurrently
    islands: int = Field(1, ge=1)  # subpopulations with their own sketch and best
    migrate_every: int = Field(2, ge=1)  # rounds between migrations of each island's best
    explore: float = Field(0.25, ge=0.0, le=1.0)  # chance a parent is any elite, not the fittest
    seed: int = 0  # parent choices and the builtin's island starts depend on it alone

    @property
    def parallel(self) -> bool:
        return self.width > 1 or self.islands > 1


class Member(BaseModel):
    """A profiled candidate, as a population or the archive holds it."""

    candidate_id: str
    kernel_ms: float
    island: int
    round: int
    descriptor: str  # behaviour: (sketch strategy, tiling family)
    sol_pct: float | None = None
    evaluation_id: str | None = None  # its profile, shown to an LLM that refines it


class Island(BaseModel):
    index: int
    sketch_sha: str | None = None
    members: list[Member] = Field(default_factory=list)  # fastest first, at most POPULATION
    written: int = 0  # candidates its lanes wrote
    failures: int = 0  # lanes of its rounds that ended without a profiled candidate

    def best(self) -> Member | None:
        return self.members[0] if self.members else None


class LaneResult(BaseModel):
    """What a branch hands back to the round."""

    lane: int
    island: int
    round: int
    written: int = 0  # candidates its coder wrote (twins of other lanes included)
    profiled: Best | None = None  # its profiled candidate (speedups against its own baseline)
    baseline: Baseline | None = None
    outcome: Outcome | None = None
    failures: list[str] = Field(default_factory=list)
    stop_reason: str | None = None  # the brain stopped (nothing to try, a budget, ...)
    llm_calls: dict[str, int] = Field(default_factory=dict)


class SearchState(GraphState):
    round: int = 0  # rounds finished
    islands: list[Island] = Field(default_factory=list)
    archive: list[Member] = Field(default_factory=list)  # the best member per descriptor
    results: Annotated[list[LaneResult], operator.add] = Field(default_factory=list)
    migrations: int = 0


class BranchInput(BaseModel):
    """What Send hands one branch: its lane and the state its six-node chain starts from."""

    lane: Lane
    start: GraphState


SEARCH_CLASSES = (SearchSettings, Member, Island, LaneResult, SearchState, BranchInput)
