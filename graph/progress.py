"""Progress of a run on stderr: a live status line (rich) on a terminal, plain lines otherwise."""

from __future__ import annotations

import time

from rich.console import Console
from rich.status import Status

from kernelgraph.state.graph_state import GraphState
from kernelgraph.state.search import SearchState


class Progress:
    """Receives node events (`event`) and finished steps (`step`) from the runner."""

    def __init__(self, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.started = time.monotonic()
        self.live: Status | None = None
        if self.console.is_terminal and not quiet:
            self.live = self.console.status("starting")
            self.live.start()

    def _stamp(self) -> str:
        seconds = int(time.monotonic() - self.started)
        return f"{seconds // 60:02d}:{seconds % 60:02d}"

    def run_started(self, run_id: str, what: str) -> None:
        self.console.print(f"run {run_id}: {what}", highlight=False, markup=False)

    def event(self, node: str, text: str) -> None:
        if not self.quiet:
            self.console.print(f"{self._stamp()} {node:<13} {text}", highlight=False, markup=False)

    def step(self, node: str, state: GraphState, spend: dict) -> None:
        best = state.best
        speedup = best.speedup_vs_eager if best else None
        where = (
            _search_position(state)
            if isinstance(state, SearchState)
            else f"candidate {state.iteration} attempt {state.attempts}"
        )
        line = (
            f"{node} done | {where} | best "
            f"{f'{speedup:.2f}x' if speedup else '—'} | {spend.get('llm_calls', 0)} LLM calls, "
            f"{_usd(spend.get('usd'))}"
        )
        if self.live is not None:
            self.live.update(line)
        elif not self.quiet:
            self.console.print(f"{self._stamp()} {line}", highlight=False, markup=False)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _search_position(state: SearchState) -> str:
    """Round, candidates, each island's best and the archive's size."""
    bests = []
    for island in state.islands:
        best = island.best()
        speed = state.baseline.speedup(best.kernel_ms, "eager") if best and state.baseline else None
        bests.append(f"{speed:.2f}x" if speed else "—")
    return (
        f"round {state.round}, {state.iteration} candidates | islands {' '.join(bests) or '—'} "
        f"| archive {len(state.archive)}"
    )


def _usd(usd: float | None) -> str:
    return "cost unknown" if usd is None else f"${usd:.4f}"
