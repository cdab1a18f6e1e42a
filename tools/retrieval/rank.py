"""Ranking (levels 1 to 3): the category tiers, BM25 in SQLite FTS5 within each, and the
optional reranking by embeddings."""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Sequence
from typing import Any, Protocol

from kernelgraph.state.library import Library
from kernelgraph.tools.retrieval.docs import ensure_docs
from kernelgraph.tools.retrieval.task import TaskQuery, unique

log = logging.getLogger(__name__)

POOL = 20  # BM25 hits fetched per category tier (the top-N that embeddings rerank)
MAX_TERMS = 64
EMBEDDING_MODEL_VAR = "KERNELGRAPH_EMBEDDING_MODEL"
EMBEDDING_URL_VAR = "KERNELGRAPH_EMBEDDING_BASE_URL"  # else $KERNELGRAPH_BASE_URL
EMBEDDING_KEY_VARS = ("KERNELGRAPH_EMBEDDING_API_KEY", "KERNELGRAPH_API_KEY", "OPENAI_API_KEY")


class Embedder(Protocol):
    """What level 3 needs of an embeddings client (langchain's `Embeddings` interface)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


def query_terms(text: str) -> list[str]:
    """The words of a query, lowercased, in order, once each: no bare numbers (sizes would
    match unrelated tasks of the same size), nothing shorter than two characters."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return unique(w for w in words if len(w) > 1 and not w.isdigit())[:MAX_TERMS]


def fts_match(text: str, required: str = "") -> str:
    """An FTS5 query matching any of the text's words (each quoted: no operator syntax); with
    `required`, only rows whose signature holds one of its words."""
    words = " OR ".join(f'"{word}"' for word in query_terms(text))
    needed = " OR ".join(f'"{word}"' for word in query_terms(required))
    return f"({words}) AND signature : ({needed})" if words and needed else words


def rank_kernels(
    library: Library, query: TaskQuery, limit: int = POOL, embedder: Embedder | None = None
) -> list[dict[str, Any]]:
    """Library kernels for a query, best first: the query's category tier, then the others
    (those that share one of the task's ops, when it has any), each by BM25 (or reranked by
    embeddings). Each hit has `tier` (0: same category) and `score` (-bm25)."""
    match = fts_match(query.text)
    common = {"dsl": query.dsl, "device": query.device, "exclude_tasks": query.exclude}
    tiers = [(True, None, match)]
    if query.category:  # another category's kernel must share an op with the task
        others = fts_match(query.text, required=query.ops)
        tiers = [(True, query.category, match), (False, query.category, others)]
    hits: list[dict[str, Any]] = []
    for tier, (same, category, words) in enumerate(tiers):
        found = library.search_kernels(
            words, category=category, same_category=same, limit=limit, **common
        )
        if embedder is not None and found:
            found = rerank(library, found, query.text, embedder)
        hits += [hit | {"tier": tier} for hit in found]
    return hits[:limit]


def rank_docs(library: Library, text: str, dsl: str, limit: int = 3) -> list[dict]:
    ensure_docs(library, dsl)
    return library.search_docs(fts_match(text), dsl, limit)


def rerank(
    library: Library, hits: list[dict[str, Any]], text: str, embedder: Embedder
) -> list[dict[str, Any]]:
    """Level 3: `hits` by the cosine similarity of their embeddings to the query's (missing
    vectors are made and kept); in their BM25 order when the endpoint fails."""
    model = str(getattr(embedder, "model", None) or type(embedder).__name__)
    try:
        vectors = library.embeddings([h["id"] for h in hits], model)
        missing = [h for h in hits if h["id"] not in vectors]
        if missing:
            made = embedder.embed_documents([_embedded_text(h) for h in missing])
            for hit, vector in zip(missing, made, strict=True):
                library.set_embedding(hit["id"], model, vector)
                vectors[hit["id"]] = list(vector)
        wanted = embedder.embed_query(text)
    except Exception as exc:  # noqa: BLE001 - embeddings are optional: BM25's order stands
        log.warning("embeddings unavailable (%s): BM25 order kept", type(exc).__name__)
        return hits
    for hit in hits:  # rounded, so that a query vector's last bits never flip the order
        hit["similarity"] = round(cosine(wanted, vectors[hit["id"]]), 6)
    return sorted(hits, key=lambda h: (-h["similarity"], h["id"]))


def _embedded_text(hit: dict[str, Any]) -> str:
    return f"{hit.get('signature', '')}\n\n{(hit.get('code') or '')[:4000]}"


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def embedder_from_env() -> Embedder | None:
    """An OpenAI-compatible embeddings client when $KERNELGRAPH_EMBEDDING_MODEL names a model
    (endpoint: $KERNELGRAPH_EMBEDDING_BASE_URL, else $KERNELGRAPH_BASE_URL; key from the
    environment, handed to the client only); None otherwise, or when it cannot be made."""
    name = os.environ.get(EMBEDDING_MODEL_VAR, "").strip()
    if not name:
        return None
    url = os.environ.get(EMBEDDING_URL_VAR) or os.environ.get("KERNELGRAPH_BASE_URL") or None
    key = next((os.environ[v] for v in EMBEDDING_KEY_VARS if os.environ.get(v)), "not-needed")
    try:
        from langchain_openai import OpenAIEmbeddings

        return OpenAIEmbeddings(
            model=name,
            base_url=url,
            api_key=key,
            max_retries=1,
            timeout=60,
            check_embedding_ctx_length=False,  # plain strings: no tokenizer download
        )
    except Exception as exc:  # noqa: BLE001 - the message may hold the key: not shown
        log.warning("cannot set up embeddings %s (%s): BM25 only", name, type(exc).__name__)
        return None
