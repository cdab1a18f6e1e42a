"""The graph's wiring, its stop rule and its checkpoint serializer, in-process and fast."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgraph.graph.build import mermaid
from kernelgraph.graph.routes import budget_stop, state_stop
from kernelgraph.state.checkpoint import serializer
from kernelgraph.state.config import Limits, RunConfig
from kernelgraph.state.graph_state import Best, GraphState, Outcome

ROOT = Path(__file__).resolve().parents[1]


def test_readme_shows_the_graph_as_built() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```mermaid\n(.*?)```", readme, re.S)
    assert block, "the README has no mermaid block"
    assert block.group(1).strip() == mermaid().strip()


def failed(**fields) -> GraphState:
    outcome = Outcome(candidate_id="c-1", status="incorrect", stage="verifier")
    return GraphState(outcome=outcome, **fields)


def profiled(sol_pct=None, **fields) -> GraphState:
    best = Best(candidate_id="c-1", kernel_ms=1.0, speedup_vs_eager=2.0, sol_pct=sol_pct)
    outcome = Outcome(candidate_id="c-1", status="passed", stage="profiler")
    return GraphState(outcome=outcome, best=best, **fields)


LIMITS = Limits(max_iterations=5, max_retries=2, max_escalations=1, plateau_patience=2)


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (failed(iteration=1, attempts=1), None),
        (failed(iteration=5, attempts=1), "max_iterations"),
        (failed(iteration=2, attempts=2, escalations=0), None),  # escalate instead
        (failed(iteration=2, attempts=2, escalations=1), "retries_exhausted"),
        (profiled(iteration=2), None),
        (profiled(sol_pct=95.0, iteration=2), "near_sol"),
        (profiled(sol_pct=170.0, iteration=2), None),  # not believable: keep refining
        (profiled(iteration=2, plateau=2), "plateau"),
        (profiled(iteration=5), "max_iterations"),
        (GraphState(stop_reason="bad_reply"), "bad_reply"),
        (GraphState(outcome=Outcome(status="rejected", stage="human")), None),
    ],
)
def test_state_stop(state: GraphState, reason: str | None) -> None:
    assert state_stop(state, LIMITS) == reason


@pytest.mark.parametrize(
    ("spend", "minutes", "limits", "reason"),
    [
        ({"llm_calls": 3, "usd": None}, 0, Limits(max_llm_calls=4), None),
        ({"llm_calls": 4, "usd": None}, 0, Limits(max_llm_calls=4), "max_llm_calls"),
        ({"llm_calls": 4, "usd": 0.5}, 0, Limits(budget_usd=0.5), "budget_usd"),
        ({"llm_calls": 4, "usd": None}, 0, Limits(budget_usd=0.5), None),  # unknown cost
        ({"llm_calls": 0, "usd": 0}, 7.0, Limits(max_minutes=5), "max_minutes"),
    ],
)
def test_budget_stop(spend, minutes, limits, reason) -> None:
    assert budget_stop(spend, minutes, limits) == reason


def test_checkpoints_bring_back_models_not_dicts() -> None:
    state = profiled(sol_pct=50.0, iteration=3, llm_calls={"coder": 3})
    serde = serializer()
    back = serde.loads_typed(serde.dumps_typed(state))
    assert isinstance(back, GraphState) and isinstance(back.best, Best)
    assert back == state


def test_branch_config_changes_by_name() -> None:
    config = RunConfig(task_path="t.py", dsl="cpp")
    changed = config.with_changes({"dsl": "triton", "max_iterations": 20, "model": "gpt-x"})
    assert (changed.dsl, changed.limits.max_iterations, changed.model.name) == (
        "triton",
        20,
        "gpt-x",
    )
    with pytest.raises(KeyError, match="unknown setting"):
        config.with_changes({"colour": "blue"})


def test_a_long_outcome_message_is_cut_at_a_word_and_says_so():
    """A mismatch line cut at 200 characters once read "got -0.109437, expected )"."""
    detail = "first at index [0, 0, 3, 635]: got -0.109437, expected -0.109556"
    long = "seed 42: output 0: " + "many words " * 40 + detail
    outcome = Outcome(status="incorrect", stage="verifier", message=long)
    assert len(outcome.message) <= 400 and outcome.message.endswith(" ...")
    assert long.startswith(outcome.message.removesuffix(" ..."))
    short = Outcome(status="incorrect", stage="verifier", message=detail)
    assert short.message == detail
