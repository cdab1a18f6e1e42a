"""The one interface every chat model implements, and the small types around it.

A chat model (an OpenAI-compatible endpoint, a script, a replay) takes a list of messages and
gives back a `ChatReply`: the text, why it stopped, and how many tokens it used. Everything
else (retries, structured output, accounting, budgets) lives in the session, above it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": str}

# Ways to ask for JSON: the endpoint's structured output, a tool call, or plain text.
Method = Literal["json_schema", "function_calling", "text"]


@dataclass(frozen=True)
class ChatReply:
    text: str
    finish_reason: str | None = None  # "length": the reply was cut off
    tokens_in: int | None = None
    tokens_out: int | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass(frozen=True)
class CallInfo:
    """What a model may use to pick its answer (a script by index, a replay by prompt hash)."""

    node: str
    index: int  # this node's call counter along the run's lineage (or the lane's)
    prompt_sha: str
    lane: int | None = None  # a parallel search's lane (state/search.py)

    @property
    def counter(self) -> str:
        """The key of this call's counter: the node's, or the node's in one lane."""
        return counter_key(self.node, self.lane)


def counter_key(node: str, lane: int | None) -> str:
    return node if lane is None else f"{node}#{lane}"


class ChatModel(Protocol):
    name: str  # recorded with each call; the key of `ModelConfig.prices`
    free: bool  # costs nothing (script, replay): usd is 0.0 without a price
    simulated: bool  # errors are simulated: retry without waiting
    structured_methods: tuple[Method, ...]  # native ways to get JSON, best first

    def describe(self) -> str: ...

    def complete(
        self,
        messages: list[Message],
        call: CallInfo,
        schema: type[BaseModel] | None = None,
        method: Method = "text",
    ) -> ChatReply: ...


class CodeAnswer(BaseModel):
    """The coder's answer: always the full new file, however the model wrote it."""

    code: str
    kind: Literal["rewrite", "edit"] = "rewrite"
    reply_sha: str | None = None


def clean_messages(messages: list[Message]) -> list[Message]:
    """Only role and content, as plain strings: what is sent, hashed and recorded."""
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]


def canonical_prompt(messages: list[Message], schema_name: str | None) -> str:
    """The prompt as canonical JSON: no model name, no time, so that replay keys are stable."""
    data = {"messages": clean_messages(messages), "schema": schema_name}
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def prompt_sha(messages: list[Message], schema_name: str | None) -> str:
    return hashlib.sha256(canonical_prompt(messages, schema_name).encode()).hexdigest()


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token) for models that report none."""
    return max(1, len(text) // 4) if text else 0
