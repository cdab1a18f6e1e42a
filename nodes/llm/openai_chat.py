"""Any OpenAI-compatible chat endpoint, through langchain-openai's `ChatOpenAI`.

The key is read from the environment when the client is made ($KERNELGRAPH_API_KEY, else
$OPENAI_API_KEY) and handed to the client only: it is never kept here, logged, put in a
message or stored. A local endpoint (localhost, 127.0.0.1) may run without one. The client
makes no retries of its own (the session retries, with backoff); its errors are turned into
this package's errors, with the endpoint's URL shown without credentials or query.
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
import warnings
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel

from kernelgraph.nodes.llm.chat import CallInfo, ChatReply, Message, Method
from kernelgraph.nodes.llm.errors import (
    AuthFailed,
    EndpointDown,
    LLMError,
    ModelConfigError,
    RateLimited,
    RequestRejected,
)
from kernelgraph.state.config import ModelConfig

KEY_VARS = ("KERNELGRAPH_API_KEY", "OPENAI_API_KEY")
BASE_URL_VAR = "KERNELGRAPH_BASE_URL"
DEFAULT_URL = "https://api.openai.com/v1"
LOCAL_NAMES = {"localhost", "0.0.0.0"}
LOCAL_KEY = "not-needed"  # what a local endpoint without a key is sent
TRANSIENT_STATUS = {408, 409}  # plus every 5xx
MAX_SERVER_MESSAGE = 300

# langchain-openai warns on stderr when an endpoint refuses structured output; falling back is
# our job, and the user sees nothing of it
warnings.filterwarnings(
    "ignore", message=r"(This model does not support|Invalid schema for) OpenAI's structured"
)


def display_url(url: str | None) -> str:
    """The URL to show: no user:password@, no query, no fragment."""
    if not url:
        return DEFAULT_URL
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def is_local(url: str | None) -> bool:
    host = (urlsplit(url).hostname or "") if url else ""
    if host in LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_key(url: str | None) -> tuple[str, str | None]:
    """(the key, the variable it came from); a local endpoint may go without one."""
    for var in KEY_VARS:
        if os.environ.get(var):
            return os.environ[var], var
    if is_local(url):
        return LOCAL_KEY, None
    raise ModelConfigError(
        f"no API key for {display_url(url)}: set {KEY_VARS[0]} (or {KEY_VARS[1]}) in the "
        "environment."
    )


def scrub(text: str) -> str:
    """`text` with any key from the environment masked (a server might echo one back)."""
    for var in KEY_VARS:
        key = os.environ.get(var)
        if key and len(key) >= 4:
            text = text.replace(key, "***")
    return text


class OpenAIChat:
    free = False
    simulated = False
    structured_methods: tuple[Method, ...] = ("json_schema", "function_calling")

    def __init__(self, name: str, base_url: str | None, model: ModelConfig) -> None:
        from langchain_openai import ChatOpenAI

        self.name = name
        self.base_url = base_url
        self.timeout_s = model.request_timeout_s
        if base_url and urlsplit(base_url).scheme not in ("http", "https"):
            raise ModelConfigError(
                f"the base URL {display_url(base_url)!r} is not an http(s) URL; pass e.g. "
                "--base-url http://localhost:8000/v1"
            )
        key, self.key_var = read_key(base_url)
        options: dict[str, Any] = {"temperature": model.temperature}
        try:
            self._llm = ChatOpenAI(
                model=name,
                base_url=base_url,
                api_key=key,
                max_retries=0,
                timeout=model.request_timeout_s,
                **{k: v for k, v in options.items() if v is not None},
            )
        except Exception as exc:  # noqa: BLE001 - the message may hold the key: not shown
            raise ModelConfigError(
                f"cannot set up the client for {self.describe()} ({type(exc).__name__}); "
                "check the model name, base URL and temperature."
            ) from None

    def describe(self) -> str:
        return f"{self.name} @ {display_url(self.base_url)}"

    def complete(
        self,
        messages: list[Message],
        call: CallInfo,
        schema: type[BaseModel] | None = None,
        method: Method = "text",
    ) -> ChatReply:
        try:
            if method == "text" or schema is None:
                return _reply(self._llm.invoke(messages))
            # json_schema gets the schema as a dict: with the class, the OpenAI client itself
            # validates the reply and raises, losing the text (and a bad reply is ours to judge)
            shape = _response_format(schema) if method == "json_schema" else schema
            runnable = self._llm.with_structured_output(shape, method=method, include_raw=True)
            return _reply(runnable.invoke(messages)["raw"], tool_args=method == "function_calling")
        except Exception as exc:  # noqa: BLE001 - every failure becomes one of our errors
            cut = _cut_off(exc)
            if cut is not None:
                return cut
            error = self._error(exc)
            error.args = (scrub(str(error)),)
            raise error from None

    def _error(self, exc: Exception) -> LLMError:
        import openai

        where = self.describe()
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            hint = (
                f"check the key in ${self.key_var}"
                if self.key_var
                else f"set {KEY_VARS[0]} (or {KEY_VARS[1]})"
            )
            return AuthFailed(f"{where} refused the key (HTTP {exc.status_code}): {hint}.")
        if isinstance(exc, openai.RateLimitError):
            return RateLimited(
                f"rate limited (HTTP 429: {_server_message(exc)})",
                retry_after=_retry_after(exc.response.headers),
            )
        if isinstance(exc, openai.APITimeoutError):
            return EndpointDown(f"no answer within {self.timeout_s:g} s")
        if isinstance(exc, openai.APIConnectionError):
            return EndpointDown(f"cannot connect: {_root_cause(exc)}")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status >= 500 or status in TRANSIENT_STATUS:
                return EndpointDown(
                    f"HTTP {status}: {_server_message(exc)}",
                    retry_after=_retry_after(exc.response.headers),
                )
            return RequestRejected(
                f"{where} rejected the request (HTTP {status}): {_server_message(exc)}",
                status=status,
            )
        return LLMError(f"{where}: the model client failed ({type(exc).__name__}: {exc})")


def _response_format(schema: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": schema.__name__, "schema": schema.model_json_schema()}
    if schema.__doc__:
        out["description"] = " ".join(schema.__doc__.split())
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _reply(message: Any, tool_args: bool = False) -> ChatReply:
    """A ChatReply from langchain's AIMessage; a tool call's arguments become the JSON text."""
    text = _text(message.content)
    if tool_args:
        if message.tool_calls:
            text = json.dumps(message.tool_calls[0]["args"])
        elif message.invalid_tool_calls:
            text = str(message.invalid_tool_calls[0].get("args") or "")
    usage = message.usage_metadata or {}
    finish = (message.response_metadata or {}).get("finish_reason")
    return ChatReply(text, finish, usage.get("input_tokens"), usage.get("output_tokens"))


def _cut_off(exc: Exception) -> ChatReply | None:
    """The OpenAI client raises on a cut-off or filtered structured reply: keep it as a reply
    (a bad one, which the session asks again)."""
    import openai

    if not isinstance(exc, (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError)):
        return None
    completion = getattr(exc, "completion", None)
    finish = "length" if isinstance(exc, openai.LengthFinishReasonError) else "content_filter"
    if completion is None or not completion.choices:
        return ChatReply("", finish)
    usage = completion.usage
    return ChatReply(
        completion.choices[0].message.content or "",
        finish,
        usage.prompt_tokens if usage else None,
        usage.completion_tokens if usage else None,
    )


def _root_cause(exc: BaseException) -> str:
    """The innermost error's message (a connection error wraps the socket's)."""
    message = str(exc)
    seen = 0
    while seen < 8 and (exc.__cause__ or exc.__context__) is not None:
        exc = exc.__cause__ or exc.__context__
        message = str(exc) or message
        seen += 1
    return " ".join(message.split())[:MAX_SERVER_MESSAGE]


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
    message = str(message or getattr(exc, "message", "") or exc)
    message = " ".join(message.split())
    return message[:MAX_SERVER_MESSAGE] + ("..." if len(message) > MAX_SERVER_MESSAGE else "")


def _retry_after(headers: Any) -> float | None:
    """Seconds from Retry-After (or retry-after-ms), if the server sent one."""
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, AttributeError):
        return None
