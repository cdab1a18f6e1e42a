"""How an error ends a run: its status, stop reason, exit code, and a message that says what is
wrong and what to do next. Looked up by the error's class, first match wins.

A task error is final (status task_error, exit 2): resuming would hit the same broken task. A
harness error is the machine's fault, not the task's or the kernel's: the run can be resumed
(status interrupted, exit 3), as after Ctrl-C or an endpoint outage.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgraph.graph.summary import EXIT_CODES, Status, sentences
from kernelgraph.nodes.llm import LLMError
from kernelgraph.tools.harness.verdict import HarnessError, TaskError, UsageError

RESUME = "Continue with: kernelgraph resume {run_id}"


@dataclass(frozen=True)
class ErrorStop:
    status: Status
    reason: str | None  # None: the error's own stop_reason
    what: str  # what went wrong; {error} is the error's text
    advice: str  # what to do; {run_id} is filled in
    exit_code: int | None = None  # None: the error's own exit_code, else the status's


ERROR_STOPS: tuple[tuple[type[BaseException], ErrorStop], ...] = (
    (
        TaskError,
        ErrorStop(
            "task_error",
            "task_error",
            "the task cannot be used: {error}",
            "This run is finished: fix the task file (or shrink it with --set) and start a new run",
        ),
    ),
    (
        HarnessError,
        ErrorStop(
            "interrupted",
            "harness_error",
            "the harness failed (the machine, not the task or a kernel): {error}",
            RESUME,
        ),
    ),
    (UsageError, ErrorStop("interrupted", "usage_error", "{error}", RESUME, exit_code=2)),
    (LLMError, ErrorStop("interrupted", None, "{error}", RESUME)),
    (KeyboardInterrupt, ErrorStop("interrupted", "interrupted", "stopped by the user", RESUME)),
)
HANDLED = tuple(kind for kind, _ in ERROR_STOPS)  # what the runner turns into a summary


@dataclass(frozen=True)
class Stop:
    status: Status
    reason: str
    message: str
    exit_code: int


def error_stop(error: BaseException, run_id: str) -> Stop:
    stop = next(stop for kind, stop in ERROR_STOPS if isinstance(error, kind))
    what = stop.what.format(error=error)
    if "kernelgraph resume" in what:  # an LLM error may say how to resume already
        message = what
    else:
        message = sentences(what, stop.advice.format(run_id=run_id))
    return Stop(
        status=stop.status,
        reason=stop.reason or getattr(error, "stop_reason", None) or stop.status,
        message=message,
        exit_code=_first_set(
            stop.exit_code, getattr(error, "exit_code", None), EXIT_CODES[stop.status]
        ),
    )


def _first_set(*codes: int | None) -> int:
    return next(code for code in codes if code is not None)
