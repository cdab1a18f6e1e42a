"""A small OpenAI-compatible chat endpoint for tests: stdlib HTTP server on 127.0.0.1.

    with FakeOpenAI() as fake:
        fake.add("some text")                      # a plain text reply
        fake.add({"summary": "..."})               # JSON: a tool call when the request offered
                                                   # tools, else the JSON as the message text
        fake.add(Reply(text="...", finish_reason="length", usage=(100, 20)))
        fake.add(Error(500, "overloaded"))         # one error answer
        ... point the client at fake.url (http://127.0.0.1:PORT/v1), any key ...
        fake.requests[0].uses_json_schema, fake.requests[0].headers["authorization"]

Switches (attributes, may be changed while it runs): `auth_fail` (every request gets 401),
`rate_limit` (the next N requests get 429; `FOREVER` for all), `retry_after` (the Retry-After
header sent with 429s), `reject_json_schema` / `reject_tools` (400 for requests that use
`response_format` json_schema / `tools`, like an endpoint without structured output). Rejected
requests do not use up queued replies. With the queue empty a request gets a 400 saying so.

It serves from a thread of the test process, so a CLI run in a subprocess reaches it by URL.
Run alone it serves replies from a JSON file: `python tests/fake_openai.py replies.json
[--port N] [--log requests.jsonl] [--auth-fail] [--rate-limit N] [--reject-json-schema]
[--reject-tools]`; it prints its URL on the first line of stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FOREVER = math.inf


@dataclass
class Reply:
    text: str | None = None
    json: Any = None  # sent as a tool call if the request offered tools, else as text
    finish_reason: str | None = None  # default "stop" ("tool_calls" for a tool call)
    usage: tuple[int, int] | None = None  # (prompt, completion) tokens; default: len/4


@dataclass
class Error:
    status: int
    message: str = "error"
    retry_after: float | None = None


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any
    status: int = 0  # what it was answered

    @property
    def uses_json_schema(self) -> bool:
        fmt = (self.body or {}).get("response_format") or {}
        return isinstance(fmt, dict) and fmt.get("type") == "json_schema"

    @property
    def uses_tools(self) -> bool:
        return bool((self.body or {}).get("tools"))

    @property
    def messages(self) -> list[dict]:
        return list((self.body or {}).get("messages") or [])

    def features(self) -> set[str]:
        return {
            name
            for name, used in (("json_schema", self.uses_json_schema), ("tools", self.uses_tools))
            if used
        } or {"text"}


def as_reply(entry: Any) -> Reply | Error:
    """A queue entry from a test: str, Reply, Error, or any JSON value (a JSON reply)."""
    if isinstance(entry, (Reply, Error)):
        return entry
    if isinstance(entry, str):
        return Reply(text=entry)
    return Reply(json=entry)


def entry_from_file(entry: Any) -> Reply | Error:
    """The JSON-file form: "text", {"json": ...}, {"text": ..., "finish_reason": ...},
    {"error": STATUS, "message": ..., "retry_after": ...}."""
    if isinstance(entry, dict) and "error" in entry:
        return Error(int(entry["error"]), entry.get("message", "error"), entry.get("retry_after"))
    if isinstance(entry, dict) and ("text" in entry or "json" in entry):
        usage = entry.get("usage")
        return Reply(
            entry.get("text"), entry.get("json"), entry.get("finish_reason"),
            tuple(usage) if usage else None,
        )  # fmt: skip
    return as_reply(entry)


class FakeOpenAI:
    def __init__(
        self,
        replies: list | tuple = (),
        *,
        auth_fail: bool = False,
        rate_limit: float = 0,
        retry_after: float | None = None,
        reject_json_schema: bool = False,
        reject_tools: bool = False,
        port: int = 0,
    ) -> None:
        self.auth_fail = auth_fail
        self.rate_limit = rate_limit
        self.retry_after = retry_after
        self.reject_json_schema = reject_json_schema
        self.reject_tools = reject_tools
        self.requests: list[Request] = []
        self.log_path: str | None = None
        self._queue: deque[Reply | Error] = deque(as_reply(r) for r in replies)
        self._lock = threading.Lock()
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # queue
    def add(self, *replies: Any) -> FakeOpenAI:
        with self._lock:
            self._queue.extend(as_reply(r) for r in replies)
        return self

    @property
    def pending(self) -> int:
        return len(self._queue)

    # life
    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first (use it as a context manager)"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # answering
    def answer(self, request: Request) -> tuple[int, dict, dict[str, str]]:
        """(status, JSON body, extra headers) for one request."""
        with self._lock:
            self.requests.append(request)
            if request.method == "GET" and request.path.rstrip("/").endswith("/models"):
                return (
                    200,
                    {"object": "list", "data": [{"id": "fake-model", "object": "model"}]},
                    {},
                )
            if not request.path.rstrip("/").endswith("/chat/completions"):
                return _error(404, f"no route {request.path}")
            if self.auth_fail:
                return _error(401, "Incorrect API key provided.", kind="authentication_error")
            if self.rate_limit > 0:
                self.rate_limit -= 1
                headers = {}
                if self.retry_after is not None:
                    headers["Retry-After"] = f"{self.retry_after:g}"
                return _error(429, "Rate limit reached.", kind="rate_limit_error", headers=headers)
            if self.reject_json_schema and request.uses_json_schema:
                return _error(400, "'response_format' of type 'json_schema' is not supported")
            if self.reject_tools and request.uses_tools:
                return _error(400, "tools are not supported by this endpoint")
            if not self._queue:
                return _error(400, "FakeOpenAI: no reply queued")
            entry = self._queue.popleft()
        if isinstance(entry, Error):
            headers = {}
            if entry.retry_after is not None:
                headers["Retry-After"] = f"{entry.retry_after:g}"
            return _error(entry.status, entry.message, headers=headers)
        return 200, completion(request, entry), {}


def _error(
    status: int, message: str, kind: str = "invalid_request_error", headers: dict | None = None
) -> tuple[int, dict, dict[str, str]]:
    return status, {"error": {"message": message, "type": kind, "code": None}}, headers or {}


def completion(request: Request, reply: Reply) -> dict:
    """An OpenAI chat.completion body for a reply."""
    body = request.body or {}
    tools = body.get("tools") or []
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    finish = reply.finish_reason or "stop"
    if reply.json is not None and tools:
        name = tools[0].get("function", {}).get("name", "tool")
        call = {"name": name, "arguments": json.dumps(reply.json)}
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": call}
        ]}  # fmt: skip
        finish = reply.finish_reason or "tool_calls"
    elif reply.json is not None:
        message["content"] = json.dumps(reply.json)
    text = message.get("content") or json.dumps(reply.json)
    asked = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
    tokens_in, tokens_out = reply.usage or (asked // 4 + 1, len(text) // 4 + 1)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAI

    def do_GET(self) -> None:
        self._handle(None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode(errors="replace")}
        self._handle(body)

    def _handle(self, body: Any) -> None:
        request = Request(
            self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
        )
        status, data, headers = self.owner.answer(request)
        request.status = status
        if self.owner.log_path:
            with self.owner._lock, open(self.owner.log_path, "a") as log:
                log.write(json.dumps(request.__dict__) + "\n")
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake OpenAI chat endpoint.")
    parser.add_argument("replies", help="JSON file: a list of replies")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", help="append each request as a JSON line to this file")
    parser.add_argument("--auth-fail", action="store_true")
    parser.add_argument("--rate-limit", type=float, default=0)
    parser.add_argument("--reject-json-schema", action="store_true")
    parser.add_argument("--reject-tools", action="store_true")
    args = parser.parse_args(argv)
    with open(args.replies) as f:
        entries = [entry_from_file(e) for e in json.load(f)]
    fake = FakeOpenAI(
        entries,
        auth_fail=args.auth_fail,
        rate_limit=args.rate_limit,
        reject_json_schema=args.reject_json_schema,
        reject_tools=args.reject_tools,
        port=args.port,
    )
    fake.log_path = args.log
    with fake:
        print(fake.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main(sys.argv[1:])
