"""The graph state: ids, hashes and small numbers only.

The SQLite checkpointer stores a full snapshot at every step, so code, prompts, replies,
verdicts and reports live in the run store (by content hash or id) and the state points at
them. Every class here is registered with the checkpointer's serializer (state.checkpoint), so
a resumed run gets models back, not dicts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

Mode = Literal["write", "retry", "refine", "feedback"]
# an outcome's message is one progress line (the whole one is in its report): a longer one is
# cut at a word and says so, never silently mid-number
MESSAGE_LIMIT = 400


class Outcome(BaseModel):
    """The last check of the current candidate: a harness status, "bad_reply", or
    "duplicate" (an earlier candidate again: not checked twice)."""

    candidate_id: str | None = None
    status: (
        str  # passed, compile_error, incorrect, rejected, timeout, crashed, bad_reply, duplicate
    )
    stage: Literal["coder", "compiler", "verifier", "profiler", "human"]
    message: str = ""  # one line for the progress display
    report_sha: str | None = None  # the full failure record / verdict, in the store
    evaluation_id: str | None = None

    @field_validator("message")
    @classmethod
    def _clipped(cls, message: str) -> str:
        if len(message) <= MESSAGE_LIMIT:
            return message
        return message[: MESSAGE_LIMIT - 4].rsplit(" ", 1)[0] + " ..."


class Best(BaseModel):
    candidate_id: str
    kernel_ms: float
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    sol_pct: float | None = None
    evaluation_id: str | None = None


class Baseline(BaseModel):
    """The run's eager and torch.compile times: every candidate's speedup is measured against
    these, so speedups compare kernels, not two timings of eager."""

    eager_ms: float | None = None
    compile_ms: float | None = None
    cached: bool = False  # from the task's cached reference store, not timed by this run

    def speedup(self, kernel_ms: float, of: Literal["eager", "compile"]) -> float | None:
        base = self.eager_ms if of == "eager" else self.compile_ms
        return base / kernel_ms if base and kernel_ms > 0 else None


class Lane(BaseModel):
    """One branch of a parallel search round (state/search.py): where it starts from and
    what it may look at."""

    lane: int  # stable across rounds: a scripted model's replies are keyed by it
    island: int
    round: int
    parent_id: str | None = None  # None: write afresh from the island's sketch
    mode: Mode = "write"
    pick: int = 0  # lanes of this round before it with the same island and parent
    start: int | None = None  # the builtin's seeded starting point for an empty island
    inspiration_id: str | None = None  # another island's best, shown to an LLM


class GraphState(BaseModel):
    analysis_sha: str | None = None  # the planner's task analysis (JSON blob)
    plan_sha: str | None = None
    sketch_sha: str | None = None
    sketch_rev: int = 0  # 1 for the first sketch, +1 on each escalation
    candidate_id: str | None = None  # the candidate being checked
    parent_id: str | None = None  # what the coder starts from next (retry / refine)
    mode: Mode = "write"  # what the coder is asked to do next
    outcome: Outcome | None = None
    feedback_sha: str | None = None  # a reviewer's rejection text
    human_approved: list[str] = Field(default_factory=list)  # edited kernels: no second ask
    recent_failures: list[str] = Field(default_factory=list)  # one line each, since the sketch
    iteration: int = 0  # candidates written
    attempts: int = 0  # consecutive failures since the last sketch or pass
    escalations: int = 0
    profiled: int = 0
    plateau: int = 0  # profiled candidates since the last real gain
    best: Best | None = None
    baseline: Baseline | None = None  # set by the first profiled candidate
    llm_calls: dict[str, int] = Field(default_factory=dict)  # per node, along this lineage
    stop_reason: str | None = None  # set by a node that cannot go on (e.g. a bad plan reply)
    last_profiled: Best | None = None  # the last candidate the profiler timed, best or not
    lane: Lane | None = None  # a search branch's lane (state/search.py); None in a plain run


STATE_CLASSES = (GraphState, Outcome, Best, Baseline, Lane)
