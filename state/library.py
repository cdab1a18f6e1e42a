"""The kernel library: every verified kernel of every run, and the DSL docs, searchable by BM25,
in the run store's own SQLite file.

- `library_kernels` (state/tables.py `LibraryKernel`): one verified, profiled kernel per (task,
  code, device kind), with its task's signature text, category, DSL, device, speedup and share
  of speed-of-light. Its id is a hash of those three, so a kernel added twice (a resumed run, a
  second run, an import) is added once.
- `library_docs` (`LibraryDoc`): which doc file (`prompts/dsl/<dsl>/*.md`) was indexed at which
  content hash, so each version of a file is cut into sections once.
- Two SQLite FTS5 tables hold the text the retrieval searches (SQLAlchemy has no FTS5: they are
  made here with raw DDL, on first use): `library_kernels_fts(kernel_id, signature, code)` and
  `library_docs_fts(path, dsl, position, title, body)`, ranked with `bm25()`.

A Python whose sqlite3 lacks FTS5 still keeps the library (`fts` is False and searches find
nothing); the FTS tables, once they can be made, are filled from the kernels already kept.
The ranking policy (categories, the prompt's budget, embeddings) lives in tools/retrieval/.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator
from sqlalchemy import select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker

from kernelgraph.state.store import RunStore, _row
from kernelgraph.state.tables import Blob, LibraryDoc, LibraryKernel, _now

log = logging.getLogger(__name__)

KERNELS_FTS = "library_kernels_fts"
DOCS_FTS = "library_docs_fts"
_TOKENIZE = "tokenize='porter unicode61'"  # words split at punctuation, English stems
_DDL = {
    KERNELS_FTS: f"CREATE VIRTUAL TABLE IF NOT EXISTS {KERNELS_FTS} USING fts5("
    f"kernel_id UNINDEXED, signature, code, {_TOKENIZE})",
    DOCS_FTS: f"CREATE VIRTUAL TABLE IF NOT EXISTS {DOCS_FTS} USING fts5("
    f"path UNINDEXED, dsl UNINDEXED, position UNINDEXED, title, body, {_TOKENIZE})",
}
# bm25() weights, one per column in table order: a term in a kernel's signature (its task's ops,
# category, shapes) counts five times one in its code; a doc section's title twice its body.
KERNEL_WEIGHTS = (0.0, 1.0, 0.2)
DOC_WEIGHTS = (0.0, 0.0, 0.0, 2.0, 1.0)


class LibraryEntry(BaseModel):
    """One kernel as it is added, exported (one JSON line each) and imported."""

    model_config = ConfigDict(extra="ignore")

    code: str
    task_hash: str
    source_hash: str = ""
    task_name: str = ""
    category: str = "other"
    signature: str = ""
    dsl: str
    device: str
    device_name: str = ""
    precision: str = ""
    policy: str = ""
    kernel_ms: float | None = None
    speedup_vs_eager: float | None = None
    sol_pct: float | None = None
    run_id: str | None = None
    candidate_id: str | None = None

    @field_validator("device")
    @classmethod
    def _device_kind(cls, device: str) -> str:
        return device_kind(device)

    @property
    def code_sha(self) -> str:
        return hashlib.sha256(self.code.encode()).hexdigest()

    @property
    def id(self) -> str:
        key = f"{self.task_hash}\n{self.code_sha}\n{self.device}"
        return "k-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def device_kind(device: str) -> str:
    """The kind of a device ("cuda:1" -> "cuda"): kernels are kept and found per kind."""
    return device.partition(":")[0]


class Library:
    """The library's reads and writes, on a run store's database. Each method is one short
    transaction, like the store's."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.engine = store.engine
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self.fts = self._ensure_fts()

    def _ensure_fts(self) -> bool:
        query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)"
        with self.engine.connect() as conn:
            have = {row[0] for row in conn.exec_driver_sql(query, tuple(_DDL))}
        if have == set(_DDL):
            return True
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("BEGIN IMMEDIATE")  # one process makes them
                fresh = KERNELS_FTS not in {
                    row[0] for row in conn.exec_driver_sql(query, tuple(_DDL))
                }
                for ddl in _DDL.values():
                    conn.exec_driver_sql(ddl)
                if fresh:  # kernels kept while FTS5 was missing become searchable
                    conn.exec_driver_sql(
                        f"INSERT INTO {KERNELS_FTS}(kernel_id, signature, code) "
                        "SELECT k.id, k.signature, b.content FROM library_kernels k "
                        "JOIN blobs b ON b.sha256 = k.code_sha"
                    )
                conn.commit()
        except OperationalError as exc:
            if "fts5" not in str(exc):
                raise
            log.warning("this Python's SQLite has no FTS5: the kernel library is not searchable")
            return False
        return True

    # kernels
    def add(self, entry: LibraryEntry) -> tuple[str, bool]:
        """Keep a kernel; (its id, whether it was new). The same task, code and device kind
        is kept once, with the figures of its first addition."""
        code_sha = self.store.put_blob(entry.code, "code")
        values = entry.model_dump(exclude={"code"}) | {
            "id": entry.id,
            "code_sha": code_sha,
            "created_at": _now(),
        }
        stmt = sqlite_insert(LibraryKernel).values(**values)
        with self.engine.begin() as conn:
            added = conn.execute(stmt.on_conflict_do_nothing(index_elements=["id"])).rowcount == 1
            if added and self.fts:
                conn.exec_driver_sql(
                    f"INSERT INTO {KERNELS_FTS}(kernel_id, signature, code) VALUES (?, ?, ?)",
                    (entry.id, entry.signature, entry.code),
                )
        return entry.id, added

    def get(self, kernel_id: str) -> dict[str, Any] | None:
        """A kernel's row plus its code, by id or by a prefix of one id; None if none matches.
        An ambiguous prefix raises KeyError."""
        stmt = select(LibraryKernel.id).where(
            LibraryKernel.id.startswith(kernel_id, autoescape=True)
        )
        with self._session() as s:
            ids = list(s.scalars(stmt.order_by(LibraryKernel.id).limit(2)))
        if kernel_id in ids:
            ids = [kernel_id]
        if len(ids) > 1:
            raise KeyError(f"{kernel_id!r} names more than one kernel: give more of its id")
        rows = self.rows(ids)
        return rows[0] if rows else None

    def rows(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The kernels with these ids (row plus code, no embedding), in the order given."""
        stmt = (
            select(LibraryKernel, Blob.content)
            .join(Blob, Blob.sha256 == LibraryKernel.code_sha)
            .where(LibraryKernel.id.in_(list(ids)))
        )
        with self._session() as s:
            found = {k.id: _kernel_row(k, code) for k, code in s.execute(stmt)}
        return [found[i] for i in ids if i in found]

    def list_kernels(
        self, dsl: str | None = None, device: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Kernels without their code, newest first."""
        stmt = select(LibraryKernel)
        if dsl:
            stmt = stmt.where(LibraryKernel.dsl == dsl)
        if device:
            stmt = stmt.where(LibraryKernel.device == device_kind(device))
        stmt = stmt.order_by(LibraryKernel.created_at.desc(), LibraryKernel.id).limit(limit)
        with self._session() as s:
            return [_kernel_row(k) for k in s.scalars(stmt)]

    def count(self) -> int:
        with self.engine.connect() as conn:
            return conn.exec_driver_sql("SELECT count(*) FROM library_kernels").scalar_one()

    def search_kernels(
        self,
        match: str,
        *,
        dsl: str | None = None,
        device: str | None = None,
        category: str | None = None,
        same_category: bool = True,
        exclude_tasks: Sequence[str] = (),
        limit: int = 20,
    ) -> list[dict[str, Any]]:
        """Kernels matching an FTS5 query, best BM25 score first (ties by id), each a row with
        its code and `score` (-bm25: higher is better). `category` keeps only that category
        (or, with `same_category=False`, only the others); a kernel whose task hash or source
        hash is in `exclude_tasks` is never returned."""
        if not self.fts or not match:
            return []
        where, params = [f"{KERNELS_FTS} MATCH ?"], [match]
        for column, value in (("dsl", dsl), ("device", device_kind(device or ""))):
            if value:
                where.append(f"k.{column} = ?")
                params.append(value)
        if category:
            where.append(f"k.category {'=' if same_category else '!='} ?")
            params.append(category)
        if exclude_tasks:
            marks = ", ".join("?" * len(exclude_tasks))
            where.append(f"k.task_hash NOT IN ({marks}) AND k.source_hash NOT IN ({marks})")
            params += [*exclude_tasks, *exclude_tasks]
        weights = ", ".join(map(str, KERNEL_WEIGHTS))
        sql = (
            f"SELECT k.id, -bm25({KERNELS_FTS}, {weights}) AS score FROM {KERNELS_FTS} "
            f"JOIN library_kernels k ON k.id = {KERNELS_FTS}.kernel_id "
            f"WHERE {' AND '.join(where)} ORDER BY score DESC, k.id LIMIT ?"
        )
        with self.engine.connect() as conn:
            scores = dict(conn.exec_driver_sql(sql, (*params, limit)).all())
        return [row | {"score": scores[row["id"]]} for row in self.rows(list(scores))]

    def embeddings(self, ids: Sequence[str], model: str) -> dict[str, list[float]]:
        """The stored vectors of these kernels made by `model`."""
        stmt = select(LibraryKernel.id, LibraryKernel.embedding).where(
            LibraryKernel.id.in_(list(ids)), LibraryKernel.embedding_model == model
        )
        with self._session() as s:
            return {kid: vector for kid, vector in s.execute(stmt) if vector}

    def set_embedding(self, kernel_id: str, model: str, vector: Sequence[float]) -> None:
        stmt = (
            update(LibraryKernel)
            .where(LibraryKernel.id == kernel_id)
            .values(embedding=[float(v) for v in vector], embedding_model=model)
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    # export and import
    def export(self) -> Iterator[dict[str, Any]]:
        """Every kernel as a `LibraryEntry` dict plus its id, by id."""
        stmt = select(LibraryKernel.id).order_by(LibraryKernel.id)
        with self._session() as s:
            ids = list(s.scalars(stmt))
        for start in range(0, len(ids), 200):
            for row in self.rows(ids[start : start + 200]):
                entry = LibraryEntry.model_validate(row)
                yield {"id": row["id"], **entry.model_dump()}

    def import_entries(self, entries: Iterable[LibraryEntry]) -> tuple[int, int]:
        """Add kernels (an export's lines); (added, already kept)."""
        added = known = 0
        for entry in entries:
            if self.add(entry)[1]:
                added += 1
            else:
                known += 1
        return added, known

    # docs
    def doc_sha(self, path: str) -> str | None:
        with self._session() as s:
            doc = s.get(LibraryDoc, path)
            return None if doc is None else doc.sha256

    def index_doc(self, path: str, dsl: str, sha: str, sections: Sequence[tuple[str, str]]) -> bool:
        """Replace a doc file's sections with `sections` (title, body) made from the content
        with hash `sha`; False (nothing done) when that content is indexed already."""
        if not self.fts:
            return False
        with self.engine.connect() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # two processes index a changed file once
            known = conn.exec_driver_sql(
                "SELECT sha256 FROM library_docs WHERE path = ?", (path,)
            ).scalar()
            if known == sha:
                conn.rollback()
                return False
            conn.exec_driver_sql(f"DELETE FROM {DOCS_FTS} WHERE path = ?", (path,))
            conn.exec_driver_sql(
                f"INSERT INTO {DOCS_FTS}(path, dsl, position, title, body) VALUES (?, ?, ?, ?, ?)",
                [(path, dsl, i, title, body) for i, (title, body) in enumerate(sections)],
            )
            conn.execute(
                sqlite_insert(LibraryDoc)
                .values(path=path, dsl=dsl, sha256=sha, sections=len(sections), created_at=_now())
                .on_conflict_do_update(
                    index_elements=["path"],
                    set_={"sha256": sha, "sections": len(sections), "created_at": _now()},
                )
            )
            conn.commit()
        return True

    def search_docs(self, match: str, dsl: str, limit: int = 5) -> list[dict[str, Any]]:
        """Doc sections of one DSL matching an FTS5 query, best first (ties by file and place):
        path, position, title, body, score."""
        if not self.fts or not match:
            return []
        weights = ", ".join(map(str, DOC_WEIGHTS))
        sql = (
            f"SELECT path, position, title, body, -bm25({DOCS_FTS}, {weights}) AS score "
            f"FROM {DOCS_FTS} WHERE {DOCS_FTS} MATCH ? AND dsl = ? "
            "ORDER BY score DESC, path, position LIMIT ?"
        )
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(sql, (match, dsl, limit)).all()
        keys = ("path", "position", "title", "body", "score")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def doc_count(self, dsl: str | None = None) -> int:
        if not self.fts:
            return 0
        sql = f"SELECT count(*) FROM {DOCS_FTS}" + (" WHERE dsl = ?" if dsl else "")
        with self.engine.connect() as conn:
            return conn.exec_driver_sql(sql, (dsl,) if dsl else ()).scalar_one()


def _kernel_row(kernel: LibraryKernel, code: str | None = None) -> dict[str, Any]:
    row = _row(kernel)
    row.pop("embedding", None)
    return row if code is None else row | {"code": code}
