"""gather: the fan-in of a search round (a node of graph/search.py). Its lanes' profiled
kernels join their islands' populations and the elite archive (every speedup against the run's
one baseline), and the islands' best migrate every `migrate_every` rounds. The edge after it
(`fan_out`) decides whether another round runs, and its lanes."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kernelgraph.nodes.checks import candidate_code
from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.search_select import descriptor, migrate, with_elite, with_member
from kernelgraph.state.graph_state import Baseline, Best
from kernelgraph.state.search import Island, LaneResult, Member, SearchState


def gather(state: SearchState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    settings, limits = ctx.config.search, ctx.config.limits
    round_ = state.round + 1
    results = sorted((r for r in state.results if r.round == round_), key=lambda r: r.lane)
    baseline = state.baseline or next((r.baseline for r in results if r.baseline), None)
    islands = [island.model_copy(deep=True) for island in state.islands]
    archive, best = list(state.archive), state.best
    for result in results:
        island = islands[result.island]
        island.written += result.written
        if result.profiled is None:
            island.failures += 1
            continue
        mine = rescored(result.profiled, baseline)
        member = _member(ctx, island, mine, round_)
        island.members = with_member(island.members, member)
        archive = with_elite(archive, member)
        if best is None or mine.kernel_ms < best.kernel_ms:
            best = mine
    before = state.best.kernel_ms if state.best else None  # a real gain is over the last round
    gained = best is not None and (
        before is None or best.kernel_ms < before * (1.0 - limits.min_gain_pct / 100.0)
    )
    moved = 0
    if len(islands) > 1 and round_ % settings.migrate_every == 0:
        islands, moved = migrate(islands)
    update = {
        "round": round_,
        "islands": islands,
        "archive": archive,
        "best": rescored(best, baseline) if best else None,
        "baseline": baseline,
        "iteration": state.iteration + sum(r.written for r in results),
        "profiled": state.profiled + sum(1 for r in results if r.profiled),
        "plateau": 0 if gained else state.plateau + 1,
        "migrations": state.migrations + moved,
        "llm_calls": _merged_counts(state.llm_calls, results),
        "recent_failures": [*state.recent_failures, *(f for r in results for f in r.failures)][-5:],
    }
    ctx.emit("gather", round_line(state.model_copy(update=update), moved))
    return update


def rescored(best: Best, baseline: Baseline | None) -> Best:
    """A lane timed its kernel against its own first baseline; the run has one."""
    if baseline is None:
        return best
    return best.model_copy(
        update={
            "speedup_vs_eager": baseline.speedup(best.kernel_ms, "eager"),
            "speedup_vs_compile": baseline.speedup(best.kernel_ms, "compile"),
        }
    )


def round_line(state: SearchState, moved: int = 0) -> str:
    """One line: the round, each island's best and the archive's size."""
    parts = []
    for island in state.islands:
        best = island.best()
        speed = state.baseline.speedup(best.kernel_ms, "eager") if best and state.baseline else None
        shown = f"{speed:.2f}x" if speed else (f"{best.kernel_ms:.4f} ms" if best else "—")
        parts.append(f"island {island.index} best {shown}")
    line = f"round {state.round}: " + ", ".join(parts) + f"; archive {len(state.archive)}"
    return line + (f"; {moved} migrated" if moved else "")


def _member(ctx: RunContext, island: Island, best: Best, round_: int) -> Member:
    sketch = ctx.get_json(island.sketch_sha)
    return Member(
        candidate_id=best.candidate_id,
        kernel_ms=best.kernel_ms,
        island=island.index,
        round=round_,
        descriptor=descriptor(candidate_code(ctx, best.candidate_id), sketch),
        sol_pct=best.sol_pct,
        evaluation_id=best.evaluation_id,
    )


def _merged_counts(counts: dict[str, int], results: list[LaneResult]) -> dict[str, int]:
    merged = dict(counts)
    for result in results:
        for key, value in result.llm_calls.items():
            merged[key] = max(merged.get(key, 0), value)
    return merged
