"""A search round's fan-in (graph/search_round.py's gather): one baseline for every lane,
populations, the archive, migration and the plateau counted in rounds."""

from __future__ import annotations

import pytest
from langgraph.runtime import Runtime

from kernelgraph.graph.search_round import gather
from kernelgraph.nodes.brain import BuiltinBrain
from kernelgraph.nodes.context import RunContext
from kernelgraph.state.config import Limits, RunConfig
from kernelgraph.state.graph_state import Baseline, Best
from kernelgraph.state.search import Island, LaneResult, SearchSettings, SearchState
from kernelgraph.state.store import RunStore

KERNEL = "@triton.jit\ndef k(x, BLOCK: tl.constexpr): ...\nCONFIG = {{'k': {{'BLOCK': {block}}}}}\n"


@pytest.fixture
def runtime(tmp_path) -> Runtime:
    store = RunStore(tmp_path / "db.sqlite")
    run_id = store.create_run("run", "task.py", "hash", "triton", "cuda")
    config = RunConfig(task_path="task.py", dsl="triton", device="cuda",
                       limits=Limits(min_gain_pct=2.0),
                       search=SearchSettings(width=2, islands=2, migrate_every=1))  # fmt: skip
    ctx = RunContext(config=config, store=store, run_id=run_id,
                     brain=BuiltinBrain(store, run_id), artifacts=tmp_path)  # fmt: skip
    return Runtime(context=ctx)


def candidate(runtime: Runtime, block: int) -> str:
    ctx = runtime.context
    return ctx.store.add_candidate(KERNEL.format(block=block), "triton", run_id=ctx.run_id)


def lane(lane: int, round_: int, cid: str, ms: float, eager: float, written: int = 1):
    timed = Best(candidate_id=cid, kernel_ms=ms, speedup_vs_eager=eager / ms)
    return LaneResult(lane=lane, island=lane % 2, round=round_, written=written, profiled=timed,
                      baseline=Baseline(eager_ms=eager))  # fmt: skip


def test_a_round_joins_its_lanes_on_one_baseline_and_trades_the_best(runtime) -> None:
    sketch = runtime.context.put_json({"stages": [{"name": "rows"}]}, "sketch")
    islands = [Island(index=i, sketch_sha=sketch) for i in range(2)]
    slow, fast = candidate(runtime, 64), candidate(runtime, 256)
    state = SearchState(islands=islands, results=[lane(0, 1, slow, 2.0, 2.0),
                                                  lane(1, 1, fast, 1.0, 2.2, written=2)])  # fmt: skip
    update = gather(state, runtime)
    assert update["baseline"].eager_ms == 2.0  # lane 0's: the run has one baseline
    assert update["best"].candidate_id == fast
    assert update["best"].speedup_vs_eager == pytest.approx(2.0)  # not lane 1's 2.2
    assert (update["round"], update["iteration"], update["plateau"]) == (1, 3, 0)
    assert update["migrations"] == 2  # every round: each island's best went to the other
    assert {m.candidate_id for m in update["islands"][0].members} == {slow, fast}
    assert sorted(m.descriptor for m in update["archive"]) == [
        "rows|1k:BLOCK=256",
        "rows|1k:BLOCK=64",
    ]

    state = state.model_copy(update=update)
    nearly = candidate(runtime, 128)
    state.results.append(lane(0, 2, nearly, 0.99, 2.5))  # 1% faster: no real gain
    second = gather(state, runtime)
    assert second["best"].candidate_id == nearly and second["plateau"] == 1
