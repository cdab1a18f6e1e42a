"""The brain behind the LLM nodes: one interface, chosen from one registry by model name.

An LLM brain renders the step's prompt and asks a chat model (any OpenAI-compatible endpoint,
a script, or a replay); the builtin brain (tools/builtin, a later issue) answers the same
three questions without a model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import prompts
from nodes.llm import CodeAnswer, ModelConfigError, open_session
from state.config import RunConfig
from state.sketch import Plan, Sketch
from state.store import RunStore

HOW_TO_CONFIGURE = (
    "Pass --model NAME --base-url URL (an OpenAI-compatible "
    "endpoint; the key goes in KERNELGRAPH_API_KEY or OPENAI_API_KEY), or set "
    "KERNELGRAPH_MODEL and KERNELGRAPH_BASE_URL, or use --model script:FILE for scripted "
    "replies or --replay RUN for a recorded run."
)


class Brain(Protocol):
    def plan(self, context: dict[str, Any], counts: dict[str, int]) -> Plan: ...

    def sketch(self, context: dict[str, Any], counts: dict[str, int]) -> Sketch: ...

    def code(
        self, context: dict[str, Any], counts: dict[str, int], current_code: str | None
    ) -> CodeAnswer: ...

    def spend(self) -> dict[str, Any]: ...

    def describe(self) -> str: ...


class LLMBrain:
    """Prompts from prompts/, answers from a chat model session (accounting included)."""

    def __init__(self, session) -> None:
        self.session = session

    def plan(self, context, counts) -> Plan:
        return self.session.ask_json("planner", prompts.render("planner", **context), Plan, counts)

    def sketch(self, context, counts) -> Sketch:
        messages = prompts.render("sketch_writer", **context)
        return self.session.ask_json("sketch_writer", messages, Sketch, counts)

    def code(self, context, counts, current_code) -> CodeAnswer:
        messages = prompts.render("coder", **context)
        return self.session.ask_code("coder", messages, counts, current_code=current_code)

    def spend(self) -> dict[str, Any]:
        return self.session.spend()

    def describe(self) -> str:
        return self.session.describe()


def _builtin(config: RunConfig, store: RunStore, run_id: str) -> Brain:
    raise ModelConfigError("The builtin model is not in this version yet. " + HOW_TO_CONFIGURE)


def _llm(config: RunConfig, store: RunStore, run_id: str) -> Brain:
    return LLMBrain(open_session(config.model, config.limits, store, run_id))


# Exact model names with a brain of their own; any other name is a chat model.
BRAINS: dict[str, Callable[[RunConfig, RunStore, str], Brain]] = {"builtin": _builtin}


def make_brain(config: RunConfig, store: RunStore, run_id: str) -> Brain:
    name = config.model.name
    if not name:
        raise ModelConfigError("No model is configured. " + HOW_TO_CONFIGURE)
    return BRAINS.get(name, _llm)(config, store, run_id)
