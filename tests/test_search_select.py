"""The parallel search's choices: descriptors, populations, the elite archive, seeded parent
selection and migration (nodes/search_select.py)."""

from __future__ import annotations

import random

import pytest

from kernelgraph.nodes.search_select import (
    POPULATION,
    choose_parent,
    descriptor,
    migrate,
    plan_round,
    tiling_family,
    with_elite,
    with_member,
)
from kernelgraph.state.search import Island, Member, SearchSettings


def member(cid: str, ms: float, island: int = 0, family: str = "a") -> Member:
    return Member(candidate_id=cid, kernel_ms=ms, island=island, round=1, descriptor=family)


TRITON = """
@triton.jit
def k(x, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr): ...
CONFIG = {"k": {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4}}
"""


def test_warps_do_not_change_the_tiling_family_but_blocks_do() -> None:
    family = tiling_family(TRITON)
    assert family == "1k:BLOCK_M=64,BLOCK_N=128"
    assert tiling_family(TRITON.replace('"num_warps": 4', '"num_warps": 8')) == family
    assert tiling_family(TRITON.replace('"BLOCK_M": 64', '"BLOCK_M": 32')) != family
    sketch = {"stages": [{"name": "gemm"}, {"name": "softmax"}]}
    assert descriptor(TRITON, sketch) == f"gemm+softmax|{family}"


def test_a_population_keeps_the_fastest_once_each() -> None:
    members: list[Member] = []
    for i in range(POPULATION + 3):
        members = with_member(members, member(f"c{i}", 10.0 - i))
    members = with_member(members, member("c10", 0.5))  # faster again: replaces its old entry
    assert len(members) == POPULATION
    assert [m.candidate_id for m in members[:2]] == ["c10", "c9"]
    assert len({m.candidate_id for m in members}) == POPULATION


def test_the_archive_keeps_the_best_of_each_descriptor() -> None:
    archive = with_elite([], member("slow", 2.0, family="a"))
    archive = with_elite(archive, member("other", 5.0, family="b"))
    archive = with_elite(archive, member("slower", 3.0, family="a"))
    assert {m.candidate_id for m in archive} == {"slow", "other"}
    archive = with_elite(archive, member("fast", 1.0, family="a"))
    assert {m.candidate_id for m in archive} == {"fast", "other"}


def test_parents_favour_the_fast_and_exploration_reaches_the_archive() -> None:
    island = Island(index=0, members=[member("fast", 1.0), member("slow", 10.0)])
    archive = [member("elsewhere", 50.0, island=1, family="z")]
    rng = random.Random(0)
    picks = [choose_parent(rng, island, archive, explore=0.0).candidate_id for _ in range(400)]
    assert picks.count("fast") > 300 and "slow" in picks and "elsewhere" not in picks
    explored = [choose_parent(rng, island, archive, explore=1.0).candidate_id for _ in range(20)]
    assert set(explored) == {"elsewhere"}
    assert choose_parent(rng, Island(index=1), archive, explore=1.0) is None  # nothing to refine


@pytest.mark.parametrize("seed", [0, 7])
def test_a_round_is_the_same_for_the_same_seed(seed: int) -> None:
    settings = SearchSettings(width=8, islands=2, seed=seed)
    islands = [
        Island(index=0, members=[member("a", 1.0), member("b", 1.5), member("c", 3.0)]),
        Island(index=1, members=[member("d", 2.0, island=1)]),
    ]
    first = plan_round(settings, islands, [], 3, 8)
    assert first == plan_round(settings, islands, [], 3, 8)
    assert [lane.island for lane in first] == [0, 1] * 4
    assert all(lane.mode == "refine" and lane.parent_id for lane in first)
    # lanes from one parent take different next files, and see another island's best
    for lane in first:
        same = [
            x
            for x in first[: lane.lane]
            if (x.island, x.parent_id) == (lane.island, lane.parent_id)
        ]
        assert lane.pick == len(same)
        assert lane.inspiration_id == ("d" if lane.island == 0 else "a")
    other_seeds = {
        tuple(
            lane.parent_id
            for lane in plan_round(settings.model_copy(update={"seed": s}), islands, [], 3, 8)
        )
        for s in range(10)
    }
    assert len(other_seeds) > 1  # the seed matters


def test_an_empty_island_writes_from_its_own_start() -> None:
    settings = SearchSettings(width=2, islands=2, seed=5)
    lanes = plan_round(settings, [Island(index=0), Island(index=1)], [], 1, 2)
    assert [(lane.mode, lane.parent_id) for lane in lanes] == [("write", None)] * 2
    assert lanes[0].start is None and lanes[1].start is not None  # island 0: the default


def test_migration_sends_each_best_round_the_ring() -> None:
    islands = [
        Island(index=0, members=[member("a", 1.0)]),
        Island(index=1, members=[member("b", 2.0, island=1)]),
        Island(index=2),
    ]
    moved, count = migrate(islands)
    assert count == 2
    assert [m.candidate_id for m in moved[1].members] == ["a", "b"]
    assert [m.candidate_id for m in moved[2].members] == ["b"]
    assert [m.candidate_id for m in moved[0].members] == ["a"]  # island 2 had none to give
    assert migrate(moved)[1] == 2  # b goes on to island 0 and a to 2; no duplicates anywhere
