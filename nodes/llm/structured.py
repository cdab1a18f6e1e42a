"""Getting a JSON object that fits a pydantic schema out of any chat model.

The best way an endpoint offers is used: its native structured output (`json_schema`), else a
tool call (`function_calling`), else plain text with the schema in the system message. A way
the endpoint refuses (400 and the like) is not tried again for that schema in this session.
Whatever way was used, the reply comes back as JSON text and is parsed and validated here, so a
bad reply gets the same follow-up (and the same prompt hash, for replay) on every endpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from pydantic import BaseModel, ValidationError

from kernelgraph.nodes.llm.chat import CallInfo, ChatModel, ChatReply, Message, Method
from kernelgraph.nodes.llm.errors import RequestRejected
from kernelgraph.nodes.llm.extract import ReplyProblem, fenced_blocks, without_reasoning

log = logging.getLogger(__name__)

MAX_OBJECT_STARTS = 200  # "{" positions tried when looking for the first JSON object
MAX_ERRORS_SHOWN = 8
REFUSAL_STATUS = {400, 422}  # how endpoints say "not this kind of request" (404: wrong model)


def schema_instruction(schema: type[BaseModel]) -> str:
    body = json.dumps(schema.model_json_schema(), indent=1, sort_keys=True)
    return (
        "Reply with one JSON object and nothing else (no prose, no code fences). "
        f"It must conform to this JSON schema:\n{body}"
    )


def with_instruction(messages: list[Message], schema: type[BaseModel]) -> list[Message]:
    """The messages with the schema instruction added to the (first) system message."""
    note = schema_instruction(schema)
    out = [dict(m) for m in messages]
    for m in out:
        if m["role"] == "system":
            m["content"] = f"{m['content']}\n\n{note}"
            return out
    return [{"role": "system", "content": note}, *out]


def complete_json(
    chat: ChatModel,
    messages: list[Message],
    call: CallInfo,
    schema: type[BaseModel],
    memory: dict[str, Method],
    send: Callable[[Callable[[], ChatReply]], ChatReply],
) -> ChatReply:
    """Ask for `schema` the best way `chat` accepts; `memory` (schema name -> method that
    worked) is kept by the caller across calls; `send` runs one request with endpoint retries."""
    name = schema.__name__
    known = memory.get(name)
    methods: list[Method] = [known] if known else [*chat.structured_methods, "text"]
    for method in methods:
        try:
            if method == "text":
                asked = with_instruction(messages, schema)
                reply = send(lambda a=asked: chat.complete(a, call, None, "text"))
            else:
                reply = send(lambda m=method: chat.complete(messages, call, schema, m))
        except RequestRejected as exc:
            if method == "text" or known or exc.status not in REFUSAL_STATUS:
                raise
            log.info("%s refused %s output (%s); trying the next way", chat.name, method, exc)
            continue
        memory[name] = method
        return reply
    raise AssertionError("unreachable: the text method either answers or raises")


def first_json_object(text: str) -> tuple[dict | None, str]:
    """The first JSON object in `text` (inside code fences first, then anywhere), and if there
    is none, why (the decoder's complaint about the first candidate)."""
    decoder = json.JSONDecoder()
    places = [b.code for b in fenced_blocks(text) if b.closed] + [text]
    first_error = ""
    for place in places:
        start = place.find("{")
        tries = 0
        while start != -1 and tries < MAX_OBJECT_STARTS:
            tries += 1
            try:
                value, _ = decoder.raw_decode(place, start)
            except json.JSONDecodeError as exc:
                first_error = first_error or f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            else:
                if isinstance(value, dict):
                    return value, ""
            start = place.find("{", start + 1)
    return None, first_error


def parse_json(reply_text: str, finish_reason: str | None, schema: type[BaseModel]) -> BaseModel:
    """The reply as a `schema` instance; raises ReplyProblem saying exactly what is wrong."""
    if finish_reason == "length":
        raise ReplyProblem(
            "truncated",
            "the reply was cut off",
            "Your reply was cut off; reply with the complete JSON object only, and keep its "
            "strings short.",
        )
    data, why = first_json_object(without_reasoning(reply_text))
    if data is None:
        detail = f" ({why})" if why else ""
        raise ReplyProblem(
            "no_json",
            f"no JSON object found{detail}",
            f"I found no JSON object in your reply{detail}. Reply with one JSON object that "
            "matches the schema, and nothing else.",
        )
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        errors = describe_errors(exc)
        raise ReplyProblem(
            "invalid",
            f"the JSON does not match the schema: {errors}",
            f"Your JSON does not match the schema: {errors}. Reply with the corrected JSON "
            "object only.",
        ) from None


def describe_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:MAX_ERRORS_SHOWN]:
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{where}: {err['msg']}")
    more = exc.error_count() - MAX_ERRORS_SHOWN
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)
