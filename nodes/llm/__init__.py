"""The LLM layer: chat models (OpenAI-compatible endpoints, scripts, replays) behind one
session that the LLM nodes ask for JSON or code, with retries, accounting and budgets.

    session = open_session(config.model, config.limits, store, run_id)
    plan = session.ask_json("planner", messages, Plan, counts)
    answer = session.ask_code("coder", messages, counts, current_code=previous)

Every error it lets out is an `LLMError` with a readable message, a `stop_reason` and an
`exit_code` (see errors.py).
"""

from kernelgraph.nodes.llm.chat import CallInfo, ChatModel, ChatReply, CodeAnswer
from kernelgraph.nodes.llm.errors import (
    AuthFailed,
    BadReply,
    BrainStop,
    BudgetExhausted,
    CannotWrite,
    EndpointDown,
    LLMError,
    ModelConfigError,
    NothingToTry,
    RateLimited,
    ReplayMissing,
    RequestRejected,
    ScriptExhausted,
)
from kernelgraph.nodes.llm.session import LLMSession, open_session

__all__ = [
    "AuthFailed",
    "BadReply",
    "BrainStop",
    "BudgetExhausted",
    "CannotWrite",
    "CallInfo",
    "ChatModel",
    "ChatReply",
    "CodeAnswer",
    "EndpointDown",
    "LLMError",
    "LLMSession",
    "ModelConfigError",
    "NothingToTry",
    "RateLimited",
    "ReplayMissing",
    "RequestRejected",
    "ScriptExhausted",
    "open_session",
]
