"""The choices of a parallel search, as pure functions of its state and seed: behaviour
descriptors, populations, the elite archive, parent selection and migration.

Every random choice comes from a `random.Random` seeded by (seed, round, lane), so a search
is the same on every replay and after every resume, whatever order its branches finished in.
"""

from __future__ import annotations

import random
import re

from kernelgraph.state.graph_state import Lane
from kernelgraph.state.search import Island, Member, SearchSettings

POPULATION = 8  # members an island keeps, fastest first
_BLOCK = re.compile(r"\b(BLOCK\w*|TILE\w*)\b['\"]?\s*[:=]\s*(\d+)")
_KERNEL = re.compile(r"@triton\.jit|__global__|T\.prim_func|PYBIND11_MODULE")


def strategy_of(sketch: dict | None) -> str:
    """A sketch's strategy, named by its stages ("gemm+softmax")."""
    stages = [str(stage.get("name", "?")) for stage in (sketch or {}).get("stages") or []]
    return "+".join(stages)[:80] or "unsketched"


def tiling_family(code: str) -> str:
    """How a kernel file tiles its work: kernels defined and the block sizes it names. Warps,
    stages and precision flags do not change the family."""
    kernels = len(_KERNEL.findall(code))
    blocks = sorted({f"{name}={value}" for name, value in _BLOCK.findall(code)})
    return f"{kernels}k:" + (",".join(blocks) or "untiled")


def descriptor(code: str, sketch: dict | None) -> str:
    return f"{strategy_of(sketch)}|{tiling_family(code)}"


def with_member(members: list[Member], member: Member) -> list[Member]:
    """A population with `member` in it: fastest first, one entry per candidate, capped."""
    kept = [m for m in members if m.candidate_id != member.candidate_id] + [member]
    return sorted(kept, key=lambda m: (m.kernel_ms, m.candidate_id))[:POPULATION]


def with_elite(archive: list[Member], member: Member) -> list[Member]:
    """The archive keeps the fastest member of each descriptor (MAP-Elites)."""
    same = [m for m in archive if m.descriptor == member.descriptor]
    if same and same[0].kernel_ms <= member.kernel_ms:
        return archive
    kept = [m for m in archive if m.descriptor != member.descriptor] + [member]
    return sorted(kept, key=lambda m: m.descriptor)


def choose_parent(rng: random.Random, island: Island, archive: list[Member],
                  explore: float) -> Member | None:  # fmt: skip
    """Fitness-proportional (1 / time) among the island's members; with chance `explore`,
    any elite of the archive instead, so slower but different kernels get refined too."""
    if not island.members:
        return None
    if archive and rng.random() < explore:
        return rng.choice(archive)
    weights = [1.0 / max(m.kernel_ms, 1e-9) for m in island.members]
    return rng.choices(island.members, weights=weights, k=1)[0]


def plan_round(settings: SearchSettings, islands: list[Island], archive: list[Member],
               round_: int, width: int) -> list[Lane]:  # fmt: skip
    """The lanes of round `round_` (1-based): lane i works on island i mod K."""
    lanes: list[Lane] = []
    for index in range(width):
        island = islands[index % len(islands)]
        rng = random.Random(f"{settings.seed}/{round_}/{index}")
        parent = choose_parent(rng, island, archive, settings.explore)
        parent_id = parent.candidate_id if parent else None
        pick = sum(
            1 for lane in lanes if (lane.island, lane.parent_id) == (island.index, parent_id)
        )
        lanes.append(
            Lane(
                lane=index,
                island=island.index,
                round=round_,
                parent_id=parent_id,
                mode="refine" if parent else "write",
                pick=pick,
                start=None if parent or island.index == 0 else settings.seed * 1000 + island.index,
                inspiration_id=_inspiration(rng, islands, island.index),
            )
        )
    return lanes


def _inspiration(rng: random.Random, islands: list[Island], mine: int) -> str | None:
    others = [i.best() for i in islands if i.index != mine and i.best() is not None]
    return rng.choice(others).candidate_id if others else None


def migrate(islands: list[Island]) -> tuple[list[Island], int]:
    """Each island's best joins the next island's population (a ring); how many moved."""
    moved = 0
    updated = [island.model_copy(deep=True) for island in islands]
    for island in islands:
        best = island.best()
        if best is None or len(islands) < 2:
            continue
        target = updated[(island.index + 1) % len(islands)]
        if all(m.candidate_id != best.candidate_id for m in target.members):
            target.members = with_member(target.members, best)
            moved += 1
    return updated, moved
