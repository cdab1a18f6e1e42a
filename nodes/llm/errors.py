"""What can go wrong when asking a model, as exceptions with one readable line each.

Every error the LLM layer lets out is an `LLMError`: its `str()` is a sentence for the user
(never a traceback, never a key), `stop_reason` names the stop for the run's record, and
`exit_code` is the command's exit status: 3 for problems that go away on their own (endpoint
down, rate limited: resume later), 2 for problems the user must fix first (key, model setup,
a replay that no longer matches, a script that ran out), 1 for the run's own limits (budget,
replies that could not be used).
"""

from __future__ import annotations


class LLMError(Exception):
    """Base class; also raised as such for a request the endpoint refused (other 4xx)."""

    stop_reason: str = "llm_error"
    exit_code: int = 1

    def __init__(self, message: str, *, stop_reason: str | None = None) -> None:
        super().__init__(message)
        if stop_reason is not None:
            self.stop_reason = stop_reason


class ModelConfigError(LLMError):
    """The model setup cannot work (no model, no key, a bad script file, no such recording)."""

    stop_reason = "model_config"
    exit_code = 2


class AuthFailed(LLMError):
    """The endpoint refused the key (401/403). Never retried."""

    stop_reason = "auth_failed"
    exit_code = 2


class EndpointDown(LLMError):
    """The endpoint did not answer (connection error, timeout, 5xx) even after retries."""

    stop_reason = "endpoint_down"
    exit_code = 3

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # seconds the server asked us to wait, if it said


class RateLimited(EndpointDown):
    """The endpoint kept answering 429 (too many requests) even after retries."""

    stop_reason = "rate_limited"


class RequestRejected(LLMError):
    """The endpoint refused the request itself (400, 404, 422...): retrying would not help.

    The structured-output layer catches it to fall back to a plainer way of asking."""

    stop_reason = "request_rejected"
    exit_code = 2

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class BrainStop(LLMError):
    """The brain has nothing more to give: the run ends cleanly with the best kernel so far."""

    exit_code = 1


class BudgetExhausted(BrainStop):
    """A run budget (`budget_usd` or `max_llm_calls`) is spent; checked before each call."""

    def __init__(self, message: str, *, stop_reason: str) -> None:
        super().__init__(message, stop_reason=stop_reason)


class BadReply(LLMError):
    """The model's replies could not be used, even after asking again with what was wrong."""

    stop_reason = "bad_reply"
    exit_code = 1


class NothingToTry(BrainStop):
    """The builtin model tried every configuration next to the best kernel."""

    stop_reason = "tuned"


class CannotWrite(BrainStop):
    """The builtin model cannot write this task (the message names the op and what to set)."""

    stop_reason = "builtin_unsupported"


class ReplayMissing(LLMError):
    """A replayed run asked something the recording has no answer for."""

    stop_reason = "replay_missing"
    exit_code = 2


class ScriptExhausted(LLMError):
    """A scripted model was asked for more replies than its script holds."""

    stop_reason = "script_exhausted"
    exit_code = 2
