"""Queries and inserts over the `llm_calls` table: what each model exchange cost, and the
recorded exchanges that replay answers from.

Totals are always read from the store, so budgets count every session of a run (a resumed run
goes on from what it already spent). A call whose cost is unknown (no price) makes the run's
USD total unknown (None).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from kernelgraph.state.store import RunStore
from kernelgraph.state.tables import LLMCall

REPLIED = ("ok", "bad_reply")  # calls that got a reply (replay answers from these)


def _as_dict(row: LLMCall) -> dict[str, Any]:
    data = {c.key: getattr(row, c.key) for c in LLMCall.__table__.columns}
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in data.items()}


def insert_call(
    store: RunStore,
    *,
    run_id: str,
    node: str,
    model: str,
    prompt_sha: str,
    reply_sha: str | None = None,
    prompt_blob: str | None = None,
    tokens_in: int | None = None,
    tokens_out: int | None = None,
    usd: float | None = None,
    seconds: float = 0.0,
    status: str = "ok",
    error: str = "",
    recorded: bool = False,
) -> str:
    """Store one exchange; returns its id (l-xxxxxxxx)."""
    return store._insert(
        lambda call_id: LLMCall(
            id=call_id,
            run_id=run_id,
            node=node,
            model=model,
            prompt_sha=prompt_sha,
            prompt_blob=prompt_blob,
            reply_sha=reply_sha,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            usd=usd,
            seconds=seconds,
            status=status,
            error=error,
            recorded=recorded,
        ),
        "l",
    )


def _totals(store: RunStore, run_id: str, by_node: bool) -> list[tuple]:
    columns = [
        func.count(LLMCall.id),
        func.coalesce(func.sum(LLMCall.tokens_in), 0),
        func.coalesce(func.sum(LLMCall.tokens_out), 0),
        func.coalesce(func.sum(LLMCall.usd), 0.0),
        func.count(LLMCall.id) - func.count(LLMCall.usd),  # calls of unknown cost
    ]
    stmt = select(*([LLMCall.node] if by_node else []), *columns)
    stmt = stmt.where(LLMCall.run_id == run_id)
    if by_node:
        stmt = stmt.group_by(LLMCall.node)
    with store._session() as s:
        return list(s.execute(stmt).all())


def _spend(calls: int, tokens_in: int, tokens_out: int, usd: float, unknown: int) -> dict:
    return {
        "llm_calls": int(calls),
        "tokens_in": int(tokens_in),
        "tokens_out": int(tokens_out),
        "usd": None if unknown else float(usd),
    }


def run_spend(store: RunStore, run_id: str) -> dict[str, Any]:
    """{"llm_calls", "tokens_in", "tokens_out", "usd"} of every call of the run; usd is None
    when any call's cost is unknown."""
    return _spend(*_totals(store, run_id, by_node=False)[0])


def node_spend(store: RunStore, run_id: str) -> dict[str, dict[str, Any]]:
    """The same totals per node."""
    return {row[0]: _spend(*row[1:]) for row in _totals(store, run_id, by_node=True)}


def known_usd(store: RunStore, run_id: str) -> float:
    """USD spent by the calls of known cost (what a USD budget can check)."""
    return float(_totals(store, run_id, by_node=False)[0][3])


def calls_for_run(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """The run's calls, oldest first."""
    stmt = select(LLMCall).where(LLMCall.run_id == run_id).order_by(LLMCall.created_at, LLMCall.id)
    with store._session() as s:
        return [_as_dict(c) for c in s.scalars(stmt)]


def count_replied(store: RunStore, run_id: str, prompt_sha: str) -> int:
    """How many times the run already got a reply to this prompt."""
    stmt = select(func.count(LLMCall.id)).where(
        LLMCall.run_id == run_id,
        LLMCall.prompt_sha == prompt_sha,
        LLMCall.status.in_(REPLIED),
    )
    with store._session() as s:
        return int(s.scalar(stmt) or 0)


def has_recorded_calls(store: RunStore, run_id: str) -> bool:
    stmt = select(LLMCall.id).where(LLMCall.run_id == run_id, LLMCall.recorded.is_(True))
    with store._session() as s:
        return s.scalars(stmt.limit(1)).first() is not None


def recorded_replies(store: RunStore, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """prompt_sha -> the calls that got a reply to it, oldest first (what replay answers)."""
    stmt = (
        select(LLMCall)
        .where(
            LLMCall.run_id == run_id,
            LLMCall.status.in_(REPLIED),
            LLMCall.reply_sha.is_not(None),
        )
        .order_by(LLMCall.created_at, LLMCall.id)
    )
    out: dict[str, list[dict[str, Any]]] = {}
    with store._session() as s:
        for call in s.scalars(stmt):
            out.setdefault(call.prompt_sha, []).append(_as_dict(call))
    return out
