"""An LLM session: the LLM nodes' one way to ask a model, for one run.

    session = open_session(model_config, limits, store, run_id)
    plan = session.ask_json("planner", messages, Plan, counts)
    answer = session.ask_code("coder", messages, counts, current_code=previous)

Each call to a model: checks the run's budgets (from the store), picks the node's tier (the
cheap model for `cheap_nodes`), sends with endpoint retries, records the exchange, and checks
the reply; a reply that cannot be used is asked again with what was wrong (each retry is a real
call). `counts[node]` is the node's call index: it picks a scripted reply and is incremented
in place for each call that reached the model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel

from kernelgraph.nodes.llm.accounting import CallBudget, record_call
from kernelgraph.nodes.llm.chat import (
    CallInfo,
    ChatModel,
    ChatReply,
    CodeAnswer,
    Message,
    Method,
    canonical_prompt,
    clean_messages,
    counter_key,
    prompt_sha,
)
from kernelgraph.nodes.llm.errors import BadReply, ModelConfigError, RequestRejected
from kernelgraph.nodes.llm.extract import ReplyProblem, code_answer
from kernelgraph.nodes.llm.prices import price_of
from kernelgraph.nodes.llm.registry import make_chat
from kernelgraph.nodes.llm.retry import with_retries
from kernelgraph.nodes.llm.structured import complete_json, parse_json
from kernelgraph.state.config import Limits, ModelConfig
from kernelgraph.state.llm_calls import run_spend
from kernelgraph.state.store import RunStore

T = TypeVar("T")
NOT_A_CHAT_MODEL = ("builtin",)


@dataclass
class Tier:
    chat: ChatModel
    methods: dict[str, Method] = field(default_factory=dict)  # schema name -> way that works


class LLMSession:
    def __init__(
        self,
        model: ModelConfig,
        limits: Limits,
        store: RunStore,
        run_id: str,
        main: ChatModel,
        cheap: ChatModel | None = None,
    ) -> None:
        self.model = model
        self.limits = limits
        self.store = store
        self.run_id = run_id
        self.main = Tier(main)
        self.cheap = Tier(cheap) if cheap is not None else None
        self.sleep = time.sleep  # backoff; tests may replace it
        self.budget = CallBudget(store, run_id, limits)  # shared by a search's branches

    def tier(self, node: str) -> Tier:
        if self.cheap is not None and node in self.model.cheap_nodes:
            return self.cheap
        return self.main

    def describe(self) -> str:
        text = self.main.chat.describe()
        if self.cheap is not None:
            text += f" ({', '.join(self.model.cheap_nodes)}: {self.cheap.chat.describe()})"
        return text

    def spend(self) -> dict[str, Any]:
        return run_spend(self.store, self.run_id)

    def ask_json(
        self, node: str, messages: list[Message], schema: type[BaseModel], counts: dict[str, int],
        lane: int | None = None,
    ) -> BaseModel:  # fmt: skip
        def judge(reply: ChatReply) -> BaseModel:
            return parse_json(reply.text, reply.finish_reason, schema)

        value, _ = self._ask(node, messages, counts, schema, judge, lane)
        return value

    def ask_code(
        self,
        node: str,
        messages: list[Message],
        counts: dict[str, int],
        current_code: str | None = None,
        lane: int | None = None,
    ) -> CodeAnswer:
        def judge(reply: ChatReply) -> CodeAnswer:
            code, kind = code_answer(reply.text, reply.finish_reason, current_code)
            return CodeAnswer(code=code, kind=kind)

        answer, reply_sha = self._ask(node, messages, counts, None, judge, lane)
        return answer.model_copy(update={"reply_sha": reply_sha})

    def _ask(self, node, messages, counts, schema, judge, lane=None) -> tuple[Any, str | None]:
        """Ask until a reply passes `judge`: 1 + bad_reply_retries calls, plus one more when
        the last failure was an edit that did not apply (the model is asked for a rewrite)."""
        tier = self.tier(node)
        convo = clean_messages(messages)
        allowed = 1 + max(0, self.model.bad_reply_retries)
        extra_given = False
        tries = 0
        while True:
            tries += 1
            value, problem, reply, reply_sha = self._exchange(
                tier, node, convo, counts, schema, judge, lane
            )
            if problem is None:
                return value, reply_sha
            if tries >= allowed:
                if problem.kind != "edit_failed" or extra_given:
                    raise BadReply(
                        f"{node}: {tries} {'reply' if tries == 1 else 'replies'} from "
                        f"{tier.chat.describe()} could not be used (the last: {problem.message})"
                    )
                extra_given, allowed = True, allowed + 1
            convo = [
                *convo,
                {"role": "assistant", "content": reply.text or "(empty reply)"},
                {"role": "user", "content": problem.feedback},
            ]

    def _exchange(self, tier, node, convo, counts, schema, judge, lane):
        """One call: budget, send (with retries), count, judge, record."""
        with self.budget.reserve() as settle:
            return self._exchange_within_budget(
                tier, node, convo, counts, schema, judge, lane, settle
            )

    def _exchange_within_budget(self, tier, node, convo, counts, schema, judge, lane, settle):
        chat = tier.chat
        schema_name = schema.__name__ if schema is not None else None
        prompt = canonical_prompt(convo, schema_name)
        key = counter_key(node, lane)
        call = CallInfo(node, counts.get(key, 0), prompt_sha(convo, schema_name), lane)
        send = partial(
            with_retries,
            retries=self.model.endpoint_retries,
            backoff_s=self.model.backoff_s,
            sleep=(lambda _s: None) if chat.simulated else self.sleep,
            where=chat.describe(),
            run_id=self.run_id,
        )
        write = partial(
            record_call, self.store, self.run_id, self.model, chat,
            node=node, prompt=prompt, prompt_sha=call.prompt_sha,
        )  # fmt: skip

        def record(**outcome: Any) -> str | None:
            return settle(partial(write, **outcome))

        started = time.monotonic()
        try:
            if schema is not None:
                reply = complete_json(chat, convo, call, schema, tier.methods, send)
            else:
                reply = send(lambda: chat.complete(convo, call, None, "text"))
        except RequestRejected as exc:
            record(reply=None, seconds=time.monotonic() - started, status="error", error=str(exc))
            raise
        seconds = time.monotonic() - started
        counts[key] = call.index + 1
        try:
            value, problem = judge(reply), None
        except ReplyProblem as exc:
            value, problem = None, exc
        status, error = ("ok", "") if problem is None else ("bad_reply", problem_note(problem))
        reply_sha = record(reply=reply, seconds=seconds, status=status, error=error)
        return value, problem, reply, reply_sha


def problem_note(problem: ReplyProblem) -> str:
    """What the record keeps about a bad reply ("truncated: ..." lets replay cut it again)."""
    return f"{problem.kind}: {problem.message}"


def open_session(model: ModelConfig, limits: Limits, store: RunStore, run_id: str) -> LLMSession:
    """A session for the run, its setup checked: ModelConfigError says what to set."""
    name = (model.name or "").strip()
    if not name or name in NOT_A_CHAT_MODEL:
        raise ModelConfigError(
            "no chat model is configured: pass --model NAME (with --base-url URL for an "
            "OpenAI-compatible endpoint), --model script:FILE, or --replay RUN."
        )
    if store.get_run(run_id) is None:
        raise ModelConfigError(f"there is no run {run_id} in {store.path}.")
    main = make_chat(name, model.base_url, model, store, run_id)
    cheap = None
    if model.cheap_name and model.cheap_nodes:
        if model.cheap_name.strip() in NOT_A_CHAT_MODEL:
            raise ModelConfigError("--cheap-model must name a chat model, not 'builtin'.")
        base_url = model.cheap_base_url or model.base_url
        cheap = make_chat(model.cheap_name.strip(), base_url, model, store, run_id)
    if limits.budget_usd is not None:
        for chat in (main, cheap):
            if chat is not None and not chat.free and price_of(model, chat.name) is None:
                raise ModelConfigError(
                    f"--budget-usd needs a price for {chat.name}: --price {chat.name}=IN/OUT "
                    "(USD per million tokens in and out)."
                )
    return LLMSession(model, limits, store, run_id, main, cheap)
