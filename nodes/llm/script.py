"""`--model script:FILE`: replies read from a JSON file, for tests and demos.

The file maps node names to lists of replies; an optional "any" list serves nodes without a
list of their own:

    {"planner": [{"json": {...}}], "sketch_writer": [...], "coder": ["```python ...```"]}

The node's call index (its counter in the graph state) picks the entry, so a resumed run gets
the same reply for the same call. In a parallel search (`--width`, `--islands`) each lane counts
its own calls: a list keyed "coder#2" serves lane 2's coder, replies in order across rounds
(the islands' sketches are lanes 0..K-1 of "sketch_writer#K"); a lane without a list of its
own takes the node's list by its own count. An entry is one of:

    "text"                           the reply text
    {"text": "..."}                  the same
    {"json": {...}}                  that object, sent back as JSON text
    {"file": "path.py"}              the file's text in a ```python fence (path relative to
                                     the script file; read when asked)
    {"truncated": "..."}             the text, cut off (finish_reason "length")
    {"error": "down" | "rate_limit" | "auth"}   a simulated endpoint error (every retry of
                                     that call gets it: EndpointDown, RateLimited, AuthFailed)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kernelgraph.nodes.llm.chat import CallInfo, ChatReply, Message, Method, estimate_tokens
from kernelgraph.nodes.llm.errors import (
    AuthFailed,
    EndpointDown,
    ModelConfigError,
    RateLimited,
    ScriptExhausted,
)
from kernelgraph.state.config import LLM_NODES

KINDS = ("text", "json", "file", "truncated", "error")
ERRORS = ("down", "rate_limit", "auth")
SHARED = "any"


class ScriptChat:
    free = True
    simulated = True
    structured_methods: tuple[Method, ...] = ()

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = Path(path).expanduser().resolve()
        self.replies = load_script(self.path)

    def describe(self) -> str:
        return f"script {self.path}"

    def complete(
        self,
        messages: list[Message],
        call: CallInfo,
        schema: type[BaseModel] | None = None,
        method: Method = "text",
    ) -> ChatReply:
        listed = next((k for k in (call.counter, call.node) if k in self.replies), None)
        entries = self.replies[listed] if listed else self.replies.get(SHARED, [])
        if call.index >= len(entries):
            listed = listed or f'"{SHARED}" (for {call.node})'
            raise ScriptExhausted(
                f"the script {self.path} has no reply {call.index + 1} for {call.counter}: its "
                f"{listed} list holds {len(entries)}. Add replies to it, then resume the run."
            )
        text, finish = self._reply(entries[call.index], call)
        tokens_in = sum(estimate_tokens(m["content"]) for m in messages)
        return ChatReply(text, finish, tokens_in, estimate_tokens(text))

    def _reply(self, entry: Any, call: CallInfo) -> tuple[str, str]:
        if isinstance(entry, str):
            return entry, "stop"
        kind, value = next(iter(entry.items()))
        if kind == "text":
            return value, "stop"
        if kind == "json":
            return json.dumps(value), "stop"
        if kind == "truncated":
            return value, "length"
        if kind == "file":
            path = self.path.parent / value
            try:
                return f"```python\n{path.read_text()}\n```", "stop"
            except OSError as exc:
                raise ModelConfigError(
                    f"the script {self.path} names {path} for {call.node} reply "
                    f"{call.index + 1}, which cannot be read ({exc.strerror})."
                ) from None
        where = f"simulated by {self.path.name} ({call.node} reply {call.index + 1})"
        if value == "auth":
            raise AuthFailed(f"the endpoint refused the key ({where}).")
        if value == "rate_limit":
            raise RateLimited(f"the endpoint is rate limiting (429, {where})")
        raise EndpointDown(f"the endpoint is down ({where})")


def load_script(path: Path) -> dict[str, list]:
    """The script's reply lists; ModelConfigError saying what is wrong with a bad file."""
    what = f"the model script {path}"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelConfigError(f"{what} does not exist; check --model script:FILE.") from None
    except OSError as exc:
        raise ModelConfigError(f"{what} cannot be read ({exc.strerror}).") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelConfigError(f"{what} is not valid JSON ({exc}).") from None
    allowed = [*LLM_NODES, SHARED]
    if not isinstance(data, dict):
        raise ModelConfigError(f"{what} must hold a JSON object with keys from {allowed}.")
    unknown = sorted(key for key in data if _node_of(key) not in allowed)
    if unknown:
        raise ModelConfigError(f"{what} has unknown keys {unknown}; use keys from {allowed}.")
    for node, entries in data.items():
        if not isinstance(entries, list):
            raise ModelConfigError(f"{what}: {node!r} must be a list of replies.")
        for i, entry in enumerate(entries, 1):
            problem = _entry_problem(entry, path)
            if problem:
                raise ModelConfigError(f"{what}: {node} reply {i} {problem}.")
    return data


def _node_of(key: str) -> str:
    """`coder#2` is the coder's list for lane 2 of a parallel search."""
    node, sep, lane = key.partition("#")
    return node if not sep or lane.isdigit() else key


def _entry_problem(entry: Any, path: Path) -> str | None:
    if isinstance(entry, str):
        return None
    if not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in KINDS:
        return f"must be a string or an object with one key from {list(KINDS)}"
    kind, value = next(iter(entry.items()))
    if kind == "json":
        return None
    if not isinstance(value, str):
        return f"has a {kind!r} that is not a string"
    if kind == "error" and value not in ERRORS:
        return f"has an unknown error {value!r}; choose from {list(ERRORS)}"
    if kind == "file" and not (path.parent / value).is_file():
        return f"names the file {path.parent / value}, which does not exist"
    return None
