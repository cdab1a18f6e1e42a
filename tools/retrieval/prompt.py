"""What the coder's prompt shows of the library (prompts/_retrieved.j2): the best kernels,
then the best doc sections, within a token budget."""

from __future__ import annotations

import math
import os
from typing import Any

from kernelgraph.state.library import Library
from kernelgraph.tools.retrieval.rank import Embedder, rank_docs, rank_kernels
from kernelgraph.tools.retrieval.task import TaskQuery

DEFAULT_K = 2  # kernels in the coder's prompt; $KERNELGRAPH_LIBRARY_K overrides
DEFAULT_TOKENS = 3000  # the retrieved text's budget; $KERNELGRAPH_LIBRARY_TOKENS (0: none)
DOC_SECTIONS = 3  # doc sections at most, after the kernels
K_VAR, TOKENS_VAR = "KERNELGRAPH_LIBRARY_K", "KERNELGRAPH_LIBRARY_TOKENS"


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _setting(var: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(var, default)))
    except ValueError:
        return default


PROMPT_FIELDS = (
    "task_name",
    "category",
    "dsl",
    "device",
    "device_name",
    "precision",
    "kernel_ms",
    "speedup_vs_eager",
    "sol_pct",
    "signature",
    "code",
)
HEADER_TOKENS = 60  # a kernel's heading and figures in the prompt


def prompt_examples(
    library: Library,
    query: TaskQuery,
    k: int | None = None,
    budget: int | None = None,
    docs: int = DOC_SECTIONS,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """What the coder's prompt shows of the library: {"kernels": [...], "docs": [...],
    "tokens": estimated size}. The best `k` kernels that fit the token budget, then the best
    doc sections that fit what is left; no ids (prompts carry none)."""
    k = _setting(K_VAR, DEFAULT_K) if k is None else k
    left = _setting(TOKENS_VAR, DEFAULT_TOKENS) if budget is None else budget
    spent = 0
    if left <= 0:
        return {"kernels": [], "docs": [], "tokens": 0}
    kernels: list[dict[str, Any]] = []
    for hit in rank_kernels(library, query, embedder=embedder) if k else []:
        cost = HEADER_TOKENS + estimate_tokens(hit["signature"]) + estimate_tokens(hit["code"])
        if cost <= left - spent:
            kernels.append({name: hit.get(name) for name in PROMPT_FIELDS})
            spent += cost
            if len(kernels) == k:
                break
    sections: list[dict[str, Any]] = []
    topic = query.topic or query.text  # shapes and the bound say little of which notes matter
    for hit in rank_docs(library, topic, query.dsl, docs) if docs and query.dsl else []:
        cost = estimate_tokens(hit["title"]) + estimate_tokens(hit["body"]) + 4
        if cost <= left - spent:
            sections.append({"title": hit["title"], "body": hit["body"], "path": hit["path"]})
            spent += cost
    return {"kernels": kernels, "docs": sections, "tokens": spent}
