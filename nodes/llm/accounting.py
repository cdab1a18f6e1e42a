"""Budgets, checked before each call, and the record of each call, in the run store.

Both read and write the store (never counters in memory), so a resumed run counts what its
earlier sessions spent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from kernelgraph.nodes.llm.chat import ChatModel, ChatReply
from kernelgraph.nodes.llm.errors import BudgetExhausted
from kernelgraph.nodes.llm.prices import cost, price_of
from kernelgraph.state.config import Limits, ModelConfig
from kernelgraph.state.llm_calls import insert_call, known_usd, run_spend
from kernelgraph.state.store import RunStore

T = TypeVar("T")


def check_budget(store: RunStore, run_id: str, limits: Limits, pending: int = 0) -> None:
    """Raise BudgetExhausted when one more call would go past a budget of the run; `pending`
    calls are under way (a search's branches) and count as made."""
    if limits.max_llm_calls is not None:
        calls = run_spend(store, run_id)["llm_calls"] + pending
        if calls >= limits.max_llm_calls:
            raise BudgetExhausted(
                f"the LLM call budget is spent ({calls} calls of --max-llm-calls "
                f"{limits.max_llm_calls})",
                stop_reason="max_llm_calls",
            )
    if limits.budget_usd is not None:
        usd = known_usd(store, run_id)
        if usd >= limits.budget_usd:
            raise BudgetExhausted(
                f"the USD budget is spent (${usd:.4f} of --budget-usd {limits.budget_usd:g})",
                stop_reason="budget_usd",
            )


class CallBudget:
    """The run's budgets for calls made at once (a search's branches): a call under way counts
    against max_llm_calls until its record is in the store. The hand-over from "under way" to
    "recorded" is atomic, so no other branch sees that call counted twice or not at all."""

    def __init__(self, store: RunStore, run_id: str, limits: Limits) -> None:
        self.store, self.run_id, self.limits = store, run_id, limits
        self._lock = threading.RLock()
        self._under_way = 0

    def calls_counted(self) -> int:
        """Calls recorded for the run plus calls under way in this process."""
        with self._lock:
            return run_spend(self.store, self.run_id)["llm_calls"] + self._under_way

    @contextmanager
    def reserve(self) -> Iterator[Callable[[Callable[[], T]], T]]:
        """Check the budgets and hold one call's place; yields `settle(write)`, which writes
        the call's record in place of the reservation. Raises BudgetExhausted."""
        with self._lock:
            check_budget(self.store, self.run_id, self.limits, pending=self._under_way)
            self._under_way += 1
        held = True

        def settle(write: Callable[[], T]) -> T:
            nonlocal held
            with self._lock:
                if held:
                    held, self._under_way = False, self._under_way - 1
                return write()

        try:
            yield settle
        finally:
            with self._lock:
                if held:
                    held, self._under_way = False, self._under_way - 1


def record_call(
    store: RunStore,
    run_id: str,
    model: ModelConfig,
    chat: ChatModel,
    *,
    node: str,
    prompt: str,
    prompt_sha: str,
    reply: ChatReply | None,
    seconds: float,
    status: str,
    error: str = "",
) -> str | None:
    """Store one exchange (the prompt's text too when the run records); returns the reply's
    blob sha (None without a reply)."""
    reply_sha = store.put_blob(reply.text, "llm_reply") if reply is not None else None
    prompt_blob = store.put_blob(prompt, "llm_prompt") if model.record else None
    tokens_in = reply.tokens_in if reply else None
    tokens_out = reply.tokens_out if reply else None
    insert_call(
        store,
        run_id=run_id,
        node=node,
        model=chat.name,
        prompt_sha=prompt_sha,
        prompt_blob=prompt_blob,
        reply_sha=reply_sha,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        usd=cost(price_of(model, chat.name), tokens_in, tokens_out, free=chat.free)
        if reply is not None
        else 0.0,
        seconds=seconds,
        status=status,
        error=error,
        recorded=model.record,
    )
    return reply_sha
