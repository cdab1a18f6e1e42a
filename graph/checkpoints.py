"""Reading a run's checkpoints back (`history`, and the step lookup of `branch`)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelgraph.state.graph_state import GraphState
from kernelgraph.state.search import SearchState


@dataclass
class Checkpoint:
    step: int
    checkpoint_id: str
    node: str  # the node whose work this checkpoint holds ("input" for the first)
    next: str  # the node that runs from here ("" at the end)
    config: dict
    state: GraphState | None

    def row(self) -> dict:
        s = self.state
        best = s.best if s else None
        search = search_columns(s) if isinstance(s, SearchState) else {}
        return search | {
            "step": self.step,
            "checkpoint_id": self.checkpoint_id,
            "node": self.node,
            "next": self.next,
            "attempt": s.attempts if s else 0,
            "iteration": s.iteration if s else 0,
            "candidate_id": s.candidate_id if s else None,
            "best_candidate": best.candidate_id if best else None,
            "best_speedup_vs_eager": best.speedup_vs_eager if best else None,
        }


def search_columns(state: SearchState) -> dict:
    """A search checkpoint's round, each island's best candidate and the archive's size."""
    return {
        "round": state.round,
        "islands": {i.index: (i.best().candidate_id if i.best() else None) for i in state.islands},
        "archive": len(state.archive),
    }


def checkpoint_list(app, run_id: str, cls: type[GraphState] = GraphState) -> list[Checkpoint]:
    """Oldest first. The node that produced checkpoint i is what checkpoint i-1 ran next."""
    snapshots = list(app.get_state_history({"configurable": {"thread_id": run_id}}))
    snapshots.sort(key=lambda s: s.metadata.get("step", -1))
    points: list[Checkpoint] = []
    for snap in snapshots:
        values = snap.values
        if isinstance(values, cls):
            state = values
        else:
            state = cls.model_validate(values) if values else None
        points.append(
            Checkpoint(
                step=snap.metadata.get("step", -1),
                checkpoint_id=snap.config["configurable"]["checkpoint_id"],
                node=(points[-1].next if points else "") or "input",
                next=snap.next[0] if snap.next else "",
                config=snap.config,
                state=state,
            )
        )
    return points
