"""Retrying what goes away on its own: connection errors, timeouts, 5xx and rate limits.

Backoff doubles from `backoff_s`; a Retry-After the server sends is honoured, up to a cap.
Anything else (a refused key, a rejected request) is not retried. When the tries run out the
error says which endpoint failed and how to go on.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelgraph.nodes.llm.chat import ChatReply
from kernelgraph.nodes.llm.errors import EndpointDown, RateLimited

RETRY_AFTER_CAP_S = 60.0


def with_retries(
    request: Callable[[], ChatReply],
    *,
    retries: int,
    backoff_s: float,
    sleep: Callable[[float], object],
    where: str,
    run_id: str,
) -> ChatReply:
    """`request()`, retried up to `retries` times while it raises EndpointDown."""
    delay = max(0.0, backoff_s)
    tries = max(0, retries) + 1
    for attempt in range(1, tries + 1):
        try:
            return request()
        except EndpointDown as exc:
            last = exc
            if attempt == tries:
                break
            wait = delay if exc.retry_after is None else min(exc.retry_after, RETRY_AFTER_CAP_S)
            sleep(wait)
            delay *= 2
    if isinstance(last, RateLimited):
        raise RateLimited(
            f"{where} kept rate limiting after {tries} tries ({last}); wait a while, then "
            f"kernelgraph resume {run_id} continues the run"
        )
    raise EndpointDown(
        f"{where} is not answering after {tries} tries ({last}); once it is back, "
        f"kernelgraph resume {run_id} continues the run"
    )
