"""The brain behind the LLM nodes: one interface, chosen from one registry by model name.

An LLM brain renders the step's prompt and asks a chat model (any OpenAI-compatible endpoint,
a script, or a replay); the builtin brain (tools/builtin) answers the same three questions
without a model, and is the default when no model is configured.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from kernelgraph import prompts
from kernelgraph.nodes.llm import CannotWrite, CodeAnswer, NothingToTry, open_session
from kernelgraph.state.config import RunConfig
from kernelgraph.state.sketch import Plan, Sketch
from kernelgraph.state.store import RunStore


class Brain(Protocol):
    def plan(self, context: dict[str, Any], counts: dict[str, int]) -> Plan: ...

    def sketch(self, context: dict[str, Any], counts: dict[str, int]) -> Sketch: ...

    def code(
        self, context: dict[str, Any], counts: dict[str, int], current_code: str | None
    ) -> CodeAnswer: ...

    def upcoming(self, context: dict[str, Any], n: int) -> list[str]: ...

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
        return self.session.ask_json(
            "sketch_writer", messages, Sketch, counts, lane=context.get("lane")
        )

    def code(self, context, counts, current_code) -> CodeAnswer:
        messages = prompts.render("coder", **context)
        return self.session.ask_code(
            "coder", messages, counts, current_code=current_code, lane=context.get("lane")
        )

    def upcoming(self, context, n) -> list[str]:
        return []  # an LLM's next answer cannot be known before it is asked

    def spend(self) -> dict[str, Any]:
        return self.session.spend()

    def describe(self) -> str:
        return self.session.describe()


class BuiltinBrain:
    """tools/builtin's model behind the Brain interface: no LLM calls, no spend."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        from kernelgraph.tools.builtin.model import BuiltinModel

        self.model, self.store, self.run_id = BuiltinModel(), store, run_id

    def _ask(self, fn):
        from kernelgraph.tools.builtin.errors import Unsupported
        from kernelgraph.tools.builtin.model import NothingToTry as Exhausted

        try:
            return fn()
        except Unsupported as exc:
            raise CannotWrite(str(exc)) from exc
        except Exhausted as exc:
            raise NothingToTry(str(exc)) from exc
        except Exception as exc:  # a builtin bug: the run ends as unwritable, with the way on
            if os.environ.get("KERNELGRAPH_DEBUG"):
                raise
            why = (f"it failed on this task with {type(exc).__name__}: {exc}; that is a "
                   "kernelgraph bug, KERNELGRAPH_DEBUG=1 shows its traceback")  # fmt: skip
            raise CannotWrite(Unsupported("this task", why).message()) from exc

    def plan(self, context, counts) -> Plan:
        return self._ask(lambda: self.model.plan(context))

    def sketch(self, context, counts) -> Sketch:
        return self._ask(lambda: self.model.sketch(context))

    def code(self, context, counts, current_code) -> CodeAnswer:
        """A search lane takes the `pick`-th next file, so lanes from one parent differ."""
        tried, best_code = self._history(context)
        pick = context.get("pick") or 0
        code = self._ask(lambda: self.model.code(context, tried, best_code, pick))
        return CodeAnswer(code=code, kind="rewrite")

    def upcoming(self, context, n) -> list[str]:
        """The next `n` kernel files `code` will write while the best stays the best."""
        tried, best_code = self._history(context)
        try:
            return self.model.upcoming(context, tried, best_code, n)
        except Exception:  # noqa: BLE001 - a guess for compiling ahead, never a failure
            return []

    def _history(self, context) -> tuple[list[str | None], str | None]:
        rows = self.store.candidates_for_run(self.run_id)
        tried = [(self.store.get_candidate(r["id"]) or {}).get("code") for r in rows]
        best = context.get("best") or {}
        best_row = self.store.get_candidate(best["candidate_id"]) if best else None
        return tried, (best_row or {}).get("code")

    def spend(self) -> dict[str, Any]:
        return {"llm_calls": 0, "tokens_in": 0, "tokens_out": 0, "usd": 0.0}

    def describe(self) -> str:
        return "builtin (no LLM)"


def _builtin(config: RunConfig, store: RunStore, run_id: str) -> Brain:
    return BuiltinBrain(store, run_id)


def _llm(config: RunConfig, store: RunStore, run_id: str) -> Brain:
    return LLMBrain(open_session(config.model, config.limits, store, run_id))


# Exact model names with a brain of their own; any other name is a chat model.
BRAINS: dict[str, Callable[[RunConfig, RunStore, str], Brain]] = {"builtin": _builtin}


def make_brain(config: RunConfig, store: RunStore, run_id: str) -> Brain:
    name = config.model.name or "builtin"  # a key in the environment never picks an endpoint
    return BRAINS.get(name, _llm)(config, store, run_id)
