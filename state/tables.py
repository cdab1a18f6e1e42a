"""The run store's tables (SQLAlchemy ORM). One Base, so `create_all` makes every table."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class Blob(Base):
    """Code, logs and reports, stored once by content hash."""

    __tablename__ = "blobs"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    content: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now)


class Run(Base):
    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now, index=True)
    kind: Mapped[str] = mapped_column(String(32))
    task_path: Mapped[str] = mapped_column(Text)
    task_hash: Mapped[str] = mapped_column(String(64), index=True)
    dsl: Mapped[str] = mapped_column(String(32))
    device: Mapped[str] = mapped_column(String(32))
    config: Mapped[dict] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(32), default="created")
    stop_reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    parent_run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    branched_from: Mapped[str | None] = mapped_column(String(64), nullable=True)  # checkpoint
    active_s: Mapped[float] = mapped_column(Float, default=0.0)  # time spent running, all sessions
    lock_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    lock_host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    lock_started: Mapped[float | None] = mapped_column(Float, nullable=True)  # pid start ticks
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=_now, onupdate=_now)


class Candidate(Base):
    __tablename__ = "candidates"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id"), index=True)
    code_sha: Mapped[str] = mapped_column(ForeignKey("blobs.sha256"))
    dsl: Mapped[str] = mapped_column(String(32))
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("candidates.id"))
    label: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now)


class Evaluation(Base):
    """One verdict. The typed columns are for queries; `verdict` keeps the whole record."""

    __tablename__ = "evaluations"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    candidate_id: Mapped[str] = mapped_column(ForeignKey("candidates.id"), index=True)
    cache_key: Mapped[str] = mapped_column(String(128), index=True)
    status: Mapped[str] = mapped_column(String(32))
    policy: Mapped[str] = mapped_column(String(32))
    precision: Mapped[str] = mapped_column(String(32))
    device: Mapped[str] = mapped_column(String(32))
    kernel_ms: Mapped[float | None] = mapped_column(Float)
    eager_ms: Mapped[float | None] = mapped_column(Float)
    torch_compile_ms: Mapped[float | None] = mapped_column(Float)
    speedup_vs_eager: Mapped[float | None] = mapped_column(Float)
    sol_pct: Mapped[float | None] = mapped_column(Float)
    verdict: Mapped[dict] = mapped_column(JSON)
    env: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now, index=True)


class LLMCall(Base):
    """One exchange with a model: what it cost, and (with --record) what was asked.

    The reply is always kept (as a blob); the prompt's text only when the run records. The
    prompt hash keys replay; no key, header or credential is ever stored.
    """

    __tablename__ = "llm_calls"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    node: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(255))
    prompt_sha: Mapped[str] = mapped_column(String(64), index=True)
    prompt_blob: Mapped[str | None] = mapped_column(String(64), nullable=True)  # with --record
    reply_sha: Mapped[str | None] = mapped_column(String(64), nullable=True)
    tokens_in: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tokens_out: Mapped[int | None] = mapped_column(Integer, nullable=True)
    usd: Mapped[float | None] = mapped_column(Float, nullable=True)  # None: price unknown
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    status: Mapped[str] = mapped_column(String(32), default="ok")  # ok, bad_reply, error
    error: Mapped[str] = mapped_column(Text, default="")
    recorded: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now, index=True)


class LibraryKernel(Base):
    """A verified, profiled kernel kept for retrieval (state/library.py). One row per (task,
    code, device kind); the code is a blob, the text searched is also in `library_kernels_fts`.
    `run_id` and `candidate_id` say where it came from (no foreign keys: a run may be deleted,
    an imported kernel has none in this store)."""

    __tablename__ = "library_kernels"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    code_sha: Mapped[str] = mapped_column(ForeignKey("blobs.sha256"))
    task_hash: Mapped[str] = mapped_column(String(64), index=True)
    source_hash: Mapped[str] = mapped_column(String(64), index=True)  # the file without --set
    task_name: Mapped[str] = mapped_column(Text, default="")
    category: Mapped[str] = mapped_column(String(32), index=True)
    signature: Mapped[str] = mapped_column(Text, default="")
    dsl: Mapped[str] = mapped_column(String(32), index=True)
    device: Mapped[str] = mapped_column(String(32))  # the device kind: cuda, cpu
    device_name: Mapped[str] = mapped_column(String(255), default="")
    precision: Mapped[str] = mapped_column(String(32), default="")
    policy: Mapped[str] = mapped_column(String(32), default="")
    kernel_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup_vs_eager: Mapped[float | None] = mapped_column(Float, nullable=True)
    sol_pct: Mapped[float | None] = mapped_column(Float, nullable=True)
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    candidate_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    embedding: Mapped[list | None] = mapped_column(JSON, nullable=True)  # level 3, optional
    embedding_model: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now, index=True)


class LibraryDoc(Base):
    """A DSL doc file indexed for retrieval, at the content hash its sections were made from."""

    __tablename__ = "library_docs"
    path: Mapped[str] = mapped_column(String(255), primary_key=True)  # "triton/pitfalls.md"
    dsl: Mapped[str] = mapped_column(String(32), index=True)
    sha256: Mapped[str] = mapped_column(String(64))
    sections: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now)
