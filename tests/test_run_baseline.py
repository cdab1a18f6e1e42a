"""One baseline per run: the first profiled candidate's eager and torch.compile times are the
run's; every later speedup divides those by the candidate's kernel time."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from langgraph.runtime import Runtime

import kernelgraph.nodes.profiler as profiler_module
from kernelgraph.nodes.profiler import profiler, run_baseline
from kernelgraph.state.config import RunConfig
from kernelgraph.state.graph_state import Baseline, GraphState
from kernelgraph.tools.harness.verdict import Timing, Verdict


@dataclass
class Context:
    """What the profiler reads of the run context, with the progress lines it emits."""

    config: RunConfig = field(default_factory=lambda: RunConfig(task_path="task.py", dsl="cpp"))
    lines: list[str] = field(default_factory=list)

    def emit(self, node: str, text: str) -> None:
        self.lines.append(text)


def passed(**timing) -> Verdict:
    return Verdict(
        status="passed", message="", dsl="cpp", device="cpu", policy="strict",
        precision="fp32", timing=Timing(**timing),
    )  # fmt: skip


def profile(monkeypatch, ctx: Context, state: GraphState, candidate_id: str, verdict: Verdict):
    monkeypatch.setattr(profiler_module, "run_harness", lambda *a, **k: (verdict, "e-1"))
    monkeypatch.setattr(profiler_module, "remember_kernel", lambda *a: None)  # library: elsewhere
    update = profiler(state.model_copy(update={"candidate_id": candidate_id}), Runtime(context=ctx))
    return state.model_copy(update=update)


def test_later_speedups_use_the_first_baseline(monkeypatch) -> None:
    ctx = Context()
    first = passed(kernel_ms=1.0, eager_ms=2.0, torch_compile_ms=1.6, baseline_cached=True)
    # eager timed again with the second candidate came out slower: it must not count
    second = passed(kernel_ms=0.5, eager_ms=3.0, torch_compile_ms=2.5, speedup_vs_eager=6.0)
    state = profile(monkeypatch, ctx, GraphState(), "c-1", first)
    state = profile(monkeypatch, ctx, state, "c-2", second)

    assert state.baseline == Baseline(eager_ms=2.0, compile_ms=1.6, cached=True)
    assert state.best.candidate_id == "c-2"
    assert state.best.speedup_vs_eager == pytest.approx(4.0)
    assert state.best.speedup_vs_compile == pytest.approx(3.2)
    assert "4.00x vs eager" in ctx.lines[-1] and "3.20x vs torch.compile" in ctx.lines[-1]
    assert all(line.endswith("(cached baseline)") for line in ctx.lines)


def test_a_baseline_timed_by_the_run_is_not_called_cached(monkeypatch) -> None:
    ctx = Context()
    state = profile(monkeypatch, ctx, GraphState(), "c-1", passed(kernel_ms=1.0, eager_ms=2.0))
    assert state.baseline.cached is False
    assert "2.00x vs eager" in ctx.lines[-1] and "cached" not in ctx.lines[-1]


def test_a_time_the_first_baseline_lacked_is_added_once() -> None:
    known = Baseline(eager_ms=2.0)
    later = run_baseline(known, Timing(kernel_ms=1.0, eager_ms=5.0, torch_compile_ms=1.5))
    assert later == Baseline(eager_ms=2.0, compile_ms=1.5)
    assert run_baseline(later, Timing(eager_ms=9.0, torch_compile_ms=9.0)) is later


def test_without_an_eager_time_there_is_no_speedup() -> None:
    assert Baseline().speedup(1.0, "eager") is None
    assert Baseline(eager_ms=2.0).speedup(0.0, "eager") is None
