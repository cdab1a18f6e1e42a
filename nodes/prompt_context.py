"""The variables every prompt gets (see prompts/*.j2): the task, its analysis, the target."""

from __future__ import annotations

import functools
from typing import Any

from kernelgraph import prompts
from kernelgraph.nodes.context import RunContext
from kernelgraph.state.graph_state import GraphState


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
