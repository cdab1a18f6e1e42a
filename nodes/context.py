"""What every node gets besides the state: the run's config, store, brain and progress sink.

Passed as LangGraph's run context (never checkpointed), so it can hold live handles.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelgraph.nodes.brain import Brain
from kernelgraph.nodes.prebuild import Prebuilder
from kernelgraph.state.config import RunConfig
from kernelgraph.state.store import RunStore
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.task import TaskSource


class UnreadCache(EvalCache):
    """--no-cache: what this run computes is stored for later runs, nothing stored is read."""

    def get(self, key: str) -> dict | None:
        return None


def eval_cache_for(config: RunConfig) -> EvalCache:
    """The cache a run's nodes use (compile reports, the task analysis, verdicts)."""
    return UnreadCache() if config.no_cache else EvalCache()


@dataclass
class RunContext:
    config: RunConfig
    store: RunStore
    run_id: str
    brain: Brain
    artifacts: Path  # runs/<run_id>/: candidate files the harness reads
    on_event: Callable[[str, str], None] = lambda node, text: None
    eval_cache: EvalCache = field(default_factory=EvalCache)
    active_s_before: float = 0.0  # time spent on this run in earlier sessions
    prebuilder: Prebuilder | None = None  # compile checks of the next configurations
    started: float = field(default_factory=time.monotonic)
    # a search's lanes write at once: which lane holds which kernel (nodes/duplicates.py)
    lane_claims: dict[str, tuple[str, int]] = field(default_factory=dict)
    lane_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def use_cache(self) -> bool:
        return not self.config.no_cache

    def task(self) -> TaskSource:
        return TaskSource.read(self.config.task_path, self.config.sets)

    def emit(self, node: str, text: str) -> None:
        self.on_event(node, text)

    def minutes(self) -> float:
        return (self.active_s_before + time.monotonic() - self.started) / 60.0

    def for_lane(self, tag: str) -> RunContext:
        """The same run, its events marked with a search lane's tag (lanes run at once)."""
        events = self.on_event
        return replace(self, on_event=lambda node, text: events(node, f"[{tag}] {text}"))

    def put_json(self, data: Any, kind: str) -> str:
        return self.store.put_blob(json.dumps(data, sort_keys=True, default=repr), kind)

    def get_json(self, sha: str | None) -> Any:
        text = self.store.get_blob(sha) if sha else None
        return None if text is None else json.loads(text)
