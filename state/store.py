"""The run store: runs, candidates, evaluations and content-addressed blobs in one SQLite file.

SQLite in WAL mode with a busy timeout, so several processes (parallel evaluations, the CLI,
LangGraph's SqliteSaver on the same file via `RunStore.path`) can read while one writes and
writers wait for each other instead of failing.

No environment variables are stored anywhere: run config is whatever the caller passes, and
`create_run` drops keys that look like credentials (see `scrub_secrets`), because the database
is meant to be copied around and shared with bug reports.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, delete, event, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from kernelgraph.state.tables import Base, Blob, Candidate, Evaluation, LLMCall, Run, _now

log = logging.getLogger(__name__)

DEFAULT_PATH = Path("runs") / "kernelgraph.db"
BUSY_TIMEOUT_MS = 30_000  # how long a writer waits for another; $KERNELGRAPH_DB_TIMEOUT_S overrides


def busy_timeout_ms() -> int:
    value = os.environ.get("KERNELGRAPH_DB_TIMEOUT_S")
    try:
        return int(float(value) * 1000) if value else BUSY_TIMEOUT_MS
    except ValueError:
        return BUSY_TIMEOUT_MS


SECRET_MARKERS = ("key", "token", "secret")


def scrub_secrets(config: Any) -> Any:
    """Drop every (nested) key whose name contains "key", "token" or "secret", case-insensitive.

    A caller that passes its settings or CLI options wholesale could otherwise write an API key
    into a file that gets shared; the price is that harmless names like "cache_key" go too.
    """
    if isinstance(config, dict):
        dropped = [k for k in config if any(m in str(k).lower() for m in SECRET_MARKERS)]
        if dropped:
            log.warning("run config: dropped secret-like keys %s", sorted(map(str, dropped)))
        return {k: scrub_secrets(v) for k, v in config.items() if k not in dropped}
    if isinstance(config, (list, tuple)):
        return [scrub_secrets(v) for v in config]
    return config


def _row(obj: Base) -> dict[str, Any]:
    data = {c.key: getattr(obj, c.key) for c in obj.__table__.columns}
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in data.items()}


def _pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={busy_timeout_ms()}")  # first: switching to WAL may wait
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # safe in WAL mode, and much faster
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class RunStore:
    """All reads and writes of the run database. Each method is one short transaction."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.engine = create_engine(
            f"sqlite:///{self.path}", connect_args={"timeout": busy_timeout_ms() / 1000}
        )
        event.listen(self.engine, "connect", _pragmas)
        with self.engine.connect() as conn:
            # Take the write lock first, so that processes opening a new file together do not
            # both see no tables and both create them.
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            Base.metadata.create_all(conn)
            conn.commit()
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _insert(self, make, prefix: str, hex_digits: int = 8) -> str:
        """Insert a row under a fresh short id, retrying on the (rare) id collision."""
        for _ in range(8):
            row = make(f"{prefix}-{secrets.token_hex(hex_digits // 2)}")
            try:
                with self._session.begin() as s:
                    s.add(row)
                return row.id
            except IntegrityError:
                if self._exists(type(row), row.id):
                    continue
                raise
        raise RuntimeError(f"could not find a free {prefix}- id")

    def _exists(self, model: type[Base], key: str) -> bool:
        with self._session() as s:
            return s.get(model, key) is not None

    # blobs
    def put_blob(self, content: str, kind: str) -> str:
        """Store text once by its sha256 (a second put is a no-op); returns the sha."""
        data = content.encode()
        sha = hashlib.sha256(data).hexdigest()
        stmt = sqlite_insert(Blob).values(
            sha256=sha, kind=kind, content=content, size=len(data), created_at=_now()
        )
        with self._session.begin() as s:
            s.execute(stmt.on_conflict_do_nothing(index_elements=["sha256"]))
        return sha

    def get_blob(self, sha: str) -> str | None:
        with self._session() as s:
            blob = s.get(Blob, sha)
            return None if blob is None else blob.content

    # runs
    def create_run(
        self,
        kind: str,
        task_path: str,
        task_hash: str,
        dsl: str,
        device: str,
        config: dict[str, Any] | None = None,
        parent_run_id: str | None = None,
        branched_from: str | None = None,
    ) -> str:
        """A new run; its id reads like r-20261122-ab12 (UTC date, then random)."""
        config = scrub_secrets(dict(config or {}))
        day = _now().strftime("%Y%m%d")
        return self._insert(
            lambda rid: Run(
                id=rid,
                kind=kind,
                task_path=str(task_path),
                task_hash=task_hash,
                dsl=dsl,
                device=device,
                config=config,
                parent_run_id=parent_run_id,
                branched_from=branched_from,
            ),
            f"r-{day}",
            hex_digits=4,
        )

    def set_run_status(self, run_id: str, status: str) -> None:
        with self._session.begin() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"no run {run_id!r}")
            run.status = status

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Set columns of a run (status, stop_reason, config...)."""
        if "config" in fields:
            fields["config"] = scrub_secrets(dict(fields["config"]))
        with self._session.begin() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"no run {run_id!r}")
            for name, value in fields.items():
                setattr(run, name, value)

    def add_active_seconds(self, run_id: str, seconds: float) -> float:
        """Add time spent working on a run (all sessions count); returns the new total."""
        with self._session.begin() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"no run {run_id!r}")
            run.active_s = (run.active_s or 0.0) + max(0.0, seconds)
            return run.active_s

    def delete_run(self, run_id: str) -> bool:
        """Remove a run with its candidates, evaluations and LLM calls (blobs are shared)."""
        with self._session.begin() as s:
            run = s.get(Run, run_id)
            if run is None:
                return False
            cands = select(Candidate.id).where(Candidate.run_id == run_id)
            s.execute(delete(Evaluation).where(Evaluation.candidate_id.in_(cands)))
            s.execute(
                update(Candidate)
                .where(Candidate.run_id != run_id)
                .where(Candidate.parent_id.in_(cands))
                .values(parent_id=None)
            )
            s.execute(update(Candidate).where(Candidate.run_id == run_id).values(parent_id=None))
            s.execute(delete(Candidate).where(Candidate.run_id == run_id))
            s.execute(delete(LLMCall).where(LLMCall.run_id == run_id))
            s.delete(run)
        return True

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        with self._session() as s:
            run = s.get(Run, run_id)
            return None if run is None else _row(run)

    def list_runs(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Newest first."""
        stmt = select(Run).order_by(Run.created_at.desc(), Run.id.desc()).limit(limit)
        with self._session() as s:
            return [_row(r) for r in s.scalars(stmt)]

    # candidates and evaluations
    def add_candidate(
        self,
        code: str,
        dsl: str,
        run_id: str | None = None,
        parent_id: str | None = None,
        label: str = "",
    ) -> str:
        sha = self.put_blob(code, "code")
        if run_id is not None:  # the same code from the same parent is the same candidate
            stmt = select(Candidate.id).where(
                Candidate.run_id == run_id,
                Candidate.code_sha == sha,
                Candidate.parent_id.is_(None)
                if parent_id is None
                else Candidate.parent_id == parent_id,
            )
            with self._session() as s:
                existing = s.scalars(stmt.limit(1)).first()
            if existing:
                return existing
        return self._insert(
            lambda cid: Candidate(
                id=cid, run_id=run_id, code_sha=sha, dsl=dsl, parent_id=parent_id, label=label
            ),
            "c",
        )

    def get_candidate(self, candidate_id: str) -> dict[str, Any] | None:
        """The candidate row plus its code."""
        with self._session() as s:
            cand = s.get(Candidate, candidate_id)
            if cand is None:
                return None
            code = s.get(Blob, cand.code_sha)
            return _row(cand) | {"code": code.content if code else None}

    def candidates_for_run(self, run_id: str) -> list[dict[str, Any]]:
        """The run's candidates, oldest first (rows, without code)."""
        stmt = (
            select(Candidate)
            .where(Candidate.run_id == run_id)
            .order_by(Candidate.created_at, Candidate.id)
        )
        with self._session() as s:
            return [_row(c) for c in s.scalars(stmt)]

    def evaluations_for_candidate(self, candidate_id: str) -> list[dict[str, Any]]:
        """Oldest first."""
        stmt = (
            select(Evaluation)
            .where(Evaluation.candidate_id == candidate_id)
            .order_by(Evaluation.created_at, Evaluation.id)
        )
        with self._session() as s:
            return [_row(e) for e in s.scalars(stmt)]

    def get_evaluation(self, evaluation_id: str) -> dict[str, Any] | None:
        with self._session() as s:
            ev = s.get(Evaluation, evaluation_id)
            return None if ev is None else _row(ev)

    def record_evaluation(self, candidate_id: str, verdict: Any) -> str:
        """Store a verdict (Verdict.to_dict(), or a Verdict) for a candidate; returns its id."""
        v = verdict.to_dict() if hasattr(verdict, "to_dict") else dict(verdict)
        timing = v.get("timing") or {}
        return self._insert(
            lambda eid: Evaluation(
                id=eid,
                candidate_id=candidate_id,
                cache_key=v.get("cache_key") or "",
                status=v["status"],
                policy=v.get("policy", ""),
                precision=v.get("precision", ""),
                device=v.get("device", ""),
                kernel_ms=timing.get("kernel_ms"),
                eager_ms=timing.get("eager_ms"),
                torch_compile_ms=timing.get("torch_compile_ms"),
                speedup_vs_eager=timing.get("speedup_vs_eager"),
                sol_pct=v.get("sol_pct"),
                verdict=v,
                env=v.get("env") or {},
            ),
            "e",
        )

    def find_evaluation(
        self, cache_key: str, candidate_id: str | None = None
    ) -> dict[str, Any] | None:
        """The newest evaluation with this cache key (row plus full `verdict`), or None; with
        `candidate_id`, only one of that candidate."""
        if not cache_key:
            return None
        stmt = select(Evaluation).where(Evaluation.cache_key == cache_key)
        if candidate_id is not None:
            stmt = stmt.where(Evaluation.candidate_id == candidate_id)
        stmt = stmt.order_by(Evaluation.created_at.desc()).limit(1)
        with self._session() as s:
            ev = s.scalars(stmt).first()
            return None if ev is None else _row(ev)

    def evaluations_for_run(self, run_id: str) -> list[dict[str, Any]]:
        """Every evaluation of the run's candidates, oldest first."""
        stmt = (
            select(Evaluation)
            .join(Candidate, Evaluation.candidate_id == Candidate.id)
            .where(Candidate.run_id == run_id)
            .order_by(Evaluation.created_at, Evaluation.id)
        )
        with self._session() as s:
            return [_row(e) for e in s.scalars(stmt)]


def default_path() -> Path:
    return Path(os.environ.get("KERNELGRAPH_DB") or DEFAULT_PATH)


def open_store(path: str | os.PathLike[str] | None = None) -> RunStore:
    """The store at `path`, else $KERNELGRAPH_DB, else ./runs/kernelgraph.db; created if new."""
    return RunStore(path if path is not None else default_path())
