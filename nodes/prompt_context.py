"""The variables every prompt gets (see prompts/*.j2): the task, its analysis, the target; and
the coder's examples from the kernel library, which learns every verified kernel."""

from __future__ import annotations

import functools
import logging
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from kernelgraph import prompts
from kernelgraph.nodes.brain import BuiltinBrain
from kernelgraph.nodes.checks import candidate_code
from kernelgraph.nodes.context import RunContext
from kernelgraph.state.graph_state import Best, GraphState
from kernelgraph.state.library import Library
from kernelgraph.tools import retrieval
from kernelgraph.tools.harness.verdict import Verdict
from kernelgraph.tools.task import task_hash

log = logging.getLogger(__name__)


@functools.cache
def _hardware(device: str) -> str:
    return prompts.hardware_notes(device)


def base_context(ctx: RunContext, state: GraphState) -> dict[str, Any]:
    config = ctx.config
    return {
        "task_source": ctx.task().effective_source,
        "analysis": ctx.get_json(state.analysis_sha) or {},
        "dsl": config.dsl,
        "device": config.device,
        "policy": config.policy,
        "precision": config.precision,
        "hardware": _hardware(config.device),
    }


def with_plan(ctx: RunContext, state: GraphState) -> dict[str, Any]:
    return base_context(ctx, state) | {
        "plan": ctx.get_json(state.plan_sha) or {},
        "dsl_docs": prompts.dsl_docs(ctx.config.dsl),
    }


def retrieved(ctx: RunContext, analysis: dict[str, Any] | None) -> dict[str, Any] | None:
    """The kernel library's examples for the coder's prompt (tools/retrieval/): verified
    kernels of similar tasks (never this task's) and the most relevant doc sections. None for
    the builtin brain, which reads no prompt."""
    if isinstance(ctx.brain, BuiltinBrain):
        return None
    config, task = ctx.config, ctx.task()
    exclude = (task.hash, task_hash(task.source, {}))
    query = retrieval.task_query(analysis, config.task_path, config.dsl, config.device, exclude)
    embedder = retrieval.embedder_from_env()
    return retrieval.prompt_examples(Library(ctx.store), query, embedder=embedder)


def remember_kernel(ctx: RunContext, state: GraphState, mine: Best, verdict: Verdict) -> None:
    """Add a verified, profiled candidate to the kernel library, where every later run's coder
    may find it (kept once per task, code and device kind)."""
    config, task = ctx.config, ctx.task()
    env = verdict.env or {}
    entry = retrieval.library_entry(
        candidate_code(ctx, mine.candidate_id),
        ctx.get_json(state.analysis_sha),
        config.task_path,
        task.hash,
        task_hash(task.source, {}),
        dsl=config.dsl,
        device=config.device,
        device_name=str(env.get("gpu_name") or env.get("cpu_model") or ""),
        precision=config.precision,
        policy=config.policy,
        kernel_ms=mine.kernel_ms,
        speedup_vs_eager=mine.speedup_vs_eager,
        sol_pct=mine.sol_pct,
        run_id=ctx.run_id,
        candidate_id=mine.candidate_id,
    )
    try:
        Library(ctx.store).add(entry)
    except SQLAlchemyError as exc:  # the library helps later runs; this one goes on
        log.warning("could not add %s to the kernel library: %s", mine.candidate_id, exc)
