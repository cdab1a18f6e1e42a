"""Retrieval for the coder: verified kernels of similar tasks, and the sections of the DSL's docs
that bear most on the task, from the kernel library in the run store (state/library.py).

Hierarchical:

1. **Category** (`task.py`). A task's op family (`tools/task_category.FAMILIES`) comes from the
   planner's analysis: `category_of` applied to what each stage computes (its composite call,
   its main op, its kind), the first family that is not `activation` deciding, as the first op
   named decides a KernelBench name; the task file's name when the stages say no more. Kernels
   of the task's category rank above all others; a kernel of another category is retrieved
   only when its signature shares one of the task's ops.
2. **BM25** (`rank.py`). Within each category tier, SQLite FTS5's bm25() over the kernels'
   signature (task, category, ops, stages, shapes, bound; weight 1) and code (weight 0.2), for
   a query made of the words of the task's own signature. Doc sections (`docs.py`: the DSL's
   Markdown cut at headings, paragraphs and list items, indexed once per content hash) are
   ranked by the task's name, category, ops and stages.
3. **Embeddings** (optional, `rank.py`): with `KERNELGRAPH_EMBEDDING_MODEL` set, each tier's
   BM25 top `POOL` is reordered by the cosine similarity of embeddings (langchain-openai's
   `OpenAIEmbeddings`) of the query and of each kernel's signature and code, whose vectors are
   kept with the kernels. A failing endpoint leaves the BM25 order.

The coder (`prompt.py`) gets the top `k` kernels of its DSL and device kind, then the top doc
sections, within a token budget (a token is taken as 4 characters); never a kernel of the same
task (the same task hash, or the same file under other `--set` sizes): no answer leaks into a
benchmark. The order is deterministic for one library state (ties by id), as prompts must be
for replay.
"""

from kernelgraph.tools.retrieval.docs import doc_sections, ensure_docs
from kernelgraph.tools.retrieval.prompt import (
    DEFAULT_K,
    DEFAULT_TOKENS,
    DOC_SECTIONS,
    K_VAR,
    TOKENS_VAR,
    estimate_tokens,
    prompt_examples,
)
from kernelgraph.tools.retrieval.rank import (
    EMBEDDING_KEY_VARS,
    EMBEDDING_MODEL_VAR,
    EMBEDDING_URL_VAR,
    POOL,
    Embedder,
    cosine,
    embedder_from_env,
    fts_match,
    query_terms,
    rank_docs,
    rank_kernels,
    rerank,
)
from kernelgraph.tools.retrieval.task import (
    TaskQuery,
    describe_task,
    library_entry,
    op_names,
    signature_fields,
    stage_family,
    task_category,
    task_query,
    text_query,
)

__all__ = [
    "DEFAULT_K",
    "DEFAULT_TOKENS",
    "DOC_SECTIONS",
    "EMBEDDING_KEY_VARS",
    "EMBEDDING_MODEL_VAR",
    "EMBEDDING_URL_VAR",
    "K_VAR",
    "POOL",
    "TOKENS_VAR",
    "Embedder",
    "TaskQuery",
    "cosine",
    "describe_task",
    "doc_sections",
    "embedder_from_env",
    "ensure_docs",
    "estimate_tokens",
    "fts_match",
    "library_entry",
    "op_names",
    "prompt_examples",
    "query_terms",
    "rank_docs",
    "rank_kernels",
    "rerank",
    "signature_fields",
    "stage_family",
    "task_category",
    "task_query",
    "text_query",
]
