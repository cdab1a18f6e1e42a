"""The kernel library and the coder's retrieval: categories from the analysis, BM25 in SQLite
FTS5 within the run store, the same task's kernels never retrieved, docs indexed once, export
and import, the `kernelgraph library` commands, the coder's prompt, optional embeddings, and a
real run adding its verified kernel."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
from agent_helpers import TASK, Agent, kernel, summary_of, write_script
from cli_helpers import assert_readable_error, json_line, kernelgraph

from kernelgraph import prompts
from kernelgraph.nodes.prompt_context import retrieved
from kernelgraph.state.config import RunConfig
from kernelgraph.state.library import Library, LibraryEntry
from kernelgraph.state.store import RunStore
from kernelgraph.state.tables import LibraryKernel
from kernelgraph.tools import retrieval
from kernelgraph.tools.task import TaskSource, task_hash

ROOT = Path(__file__).resolve().parents[1]
RMSNORM_TASK = ROOT / "tests" / "cases" / "tasks" / "prompt_example_rmsnorm.py"


def op(name: str, kind: str) -> dict:
    return {"op": f"aten.{name}", "kind": kind, "shape": [16, 4096], "dtype": "float32"}


def analysis(ops: list[dict], stages: list[dict], bound: str = "memory") -> dict:
    tensor = {"shape": [16, 4096], "dtype": "float32"}
    return {"ops": ops, "stages": stages, "inputs": [tensor], "outputs": [tensor], "bound": bound}


def stage(kind: str, ops: list[int], anchor: int | None = None, composite=None) -> dict:
    return {"kind": kind, "ops": ops, "anchor": anchor, "composite": composite}


SOFTMAX = analysis([op("_softmax", "softmax")], [stage("softmax", [0], 0)])
LOG_SOFTMAX = analysis([op("_log_softmax", "softmax")], [stage("softmax", [0], 0)])
GEMM = analysis([op("mm", "gemm"), op("relu", "pointwise")], [stage("gemm", [0, 1], 0)], "compute")
RELU = analysis([op("relu", "pointwise")], [stage("pointwise", [0])])
SUM_EXP = analysis(
    [
        op("amax", "reduction"),
        op("sub", "pointwise"),
        op("exp", "pointwise"),
        op("sum", "reduction"),
    ],
    [stage("reduction", [0], 0), stage("reduction", [1, 2, 3], 3)],
)
CODE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    # {note}\n    pass\n"


def entry(name: str, facts: dict, note: str = "", **fields) -> LibraryEntry:
    """A library kernel for a task named `name` with analysis `facts`."""
    figures = {"dsl": "triton", "device": "cuda", "speedup_vs_eager": 1.5, "sol_pct": 40.0}
    return retrieval.library_entry(
        CODE.format(note=note or name),
        facts,
        f"/kb/{name}.py",
        fields.pop("task_hash", task_hash(name, {})),
        fields.pop("source_hash", task_hash(name, {})),
        **(figures | fields),
    )


@pytest.fixture
def store(tmp_path: Path):
    store = RunStore(tmp_path / "runs.db")
    yield store
    store.close()


@pytest.fixture
def library(store: RunStore) -> Library:
    return Library(store)


def softmax_query(**overrides) -> retrieval.TaskQuery:
    query = retrieval.task_query(
        SOFTMAX, "/kb/level1/23_Softmax.py", "triton", "cuda:0", [task_hash("23_Softmax", {})]
    )
    return retrieval.TaskQuery(**(vars(query) | overrides))


# ---------------------------------------------------------------- what a task is


@pytest.mark.parametrize(
    ("facts", "name", "category"),
    [
        (SOFTMAX, "task", "softmax"),
        (GEMM, "23_Softmax", "gemm"),  # the analysis decides where it can
        (analysis([op("mse_loss", "reduction")], [stage("reduction", [0], 0)]), "x", "loss"),
        (
            analysis(
                [op("pow", "pointwise"), op("mean", "reduction")],
                [stage("norm", [0, 1], None, "rms_norm")],
            ),
            "x",
            "norm",
        ),
        (RELU, "level2/5_Gemm_ReLU", "gemm"),  # pointwise stages are weak: the name decides
        (RELU, "scale_add", "activation"),
        ({}, "level1/23_Softmax.py", "softmax"),  # no analysis: the name
        ({}, "task", "other"),
    ],
)
def test_the_category_comes_from_the_analysis_then_the_name(facts, name, category) -> None:
    assert retrieval.task_category(facts, name) == category


def test_the_signature_names_the_ops_stages_shapes_and_bound() -> None:
    name, category, text = retrieval.describe_task(SUM_EXP, "/kb/level1/99_Sum_exp.py")
    assert (name, category) == ("level1/99_sum_exp", "reduction")
    assert text.splitlines() == [
        "task: level1/99_sum_exp",
        "category: reduction",
        "ops: amax sub exp sum",
        "stages: reduction",
        "inputs: float32[16, 4096]",
        "outputs: float32[16, 4096]",
        "bound: memory",
    ]
    assert retrieval.query_terms("ops: aten.add 1024 x float32[16]") == [
        "ops",
        "aten",
        "add",
        "float32",
    ]


# ---------------------------------------------------------------- ranking


def test_a_same_category_kernel_ranks_above_unrelated_ones(library: Library) -> None:
    same = entry("level1/24_LogSoftmax", LOG_SOFTMAX)
    # a reduction whose signature reads word for word like the query's
    lexical = entry("level1/99_Sum_exp", SUM_EXP).model_copy(
        update={"signature": softmax_query().text}
    )
    assert lexical.category == "reduction"
    unrelated = [entry("level1/1_Matmul", GEMM), entry("level1/19_ReLU", RELU)]
    for item in (*unrelated, lexical, same):
        library.add(item)
    # BM25 alone prefers it ...
    flat = retrieval.rank_kernels(library, softmax_query(category=""))
    assert flat[0]["id"] == lexical.id
    # ... the category puts the other softmax first, and every unrelated kernel after it
    hits = retrieval.rank_kernels(library, softmax_query())
    assert [h["id"] for h in hits][:2] == [same.id, lexical.id]
    assert [h["tier"] for h in hits] == sorted(h["tier"] for h in hits)
    assert {h["category"] for h in hits if h["tier"] == 0} == {"softmax"}
    # another category's kernel is retrieved only when it shares an op with the task
    assert not {u.id for u in unrelated} & {h["id"] for h in hits}
    assert all(h["score"] > 0 for h in hits)


def test_only_the_runs_dsl_and_device_kind(library: Library) -> None:
    library.add(entry("a_softmax", LOG_SOFTMAX, dsl="cuda"))
    library.add(entry("b_softmax", LOG_SOFTMAX, device="cpu"))
    library.add(keep := entry("c_softmax", LOG_SOFTMAX, device="cuda:1"))
    assert [h["id"] for h in retrieval.rank_kernels(library, softmax_query())] == [keep.id]


def test_the_same_tasks_kernel_is_never_retrieved(library: Library) -> None:
    mine = task_hash("23_Softmax", {})
    library.add(entry("level1/23_Softmax", SOFTMAX, task_hash=mine, source_hash=mine))
    resized = task_hash("23_Softmax", {"DIM": 8})  # the same file under other --set sizes
    library.add(
        entry("level1/23_Softmax", SOFTMAX, note="resized", task_hash=resized, source_hash=mine)
    )
    library.add(other := entry("level1/24_LogSoftmax", LOG_SOFTMAX))
    query = softmax_query()
    assert [h["id"] for h in retrieval.rank_kernels(library, query)] == [other.id]
    examples = retrieval.prompt_examples(library, query, k=5, budget=100_000)
    assert [k["task_name"] for k in examples["kernels"]] == ["level1/24_logsoftmax"]


def test_ties_are_broken_by_id_and_ranking_is_deterministic(library: Library) -> None:
    twins = [entry("twin", LOG_SOFTMAX, task_hash=f"{i:064x}") for i in range(4)]
    for twin in reversed(twins):
        library.add(twin)
    first = retrieval.rank_kernels(library, softmax_query())
    assert [h["id"] for h in first] == sorted(t.id for t in twins)
    assert retrieval.rank_kernels(library, softmax_query()) == first


def test_the_prompt_budget_skips_what_does_not_fit(library: Library) -> None:
    library.add(big := entry("level1/25_Softmax_big", LOG_SOFTMAX, note="x" * 8000))
    library.add(entry("level1/24_LogSoftmax", LOG_SOFTMAX))
    library.add(entry("level1/26_LogSoftmax_other", LOG_SOFTMAX))
    query = softmax_query()
    ranked = retrieval.rank_kernels(library, query)
    assert ranked[0]["id"] == big.id
    examples = retrieval.prompt_examples(library, query, k=1, budget=1000)
    assert [k["code"] for k in examples["kernels"]] == [ranked[1]["code"]]  # the next that fits
    assert 0 < examples["tokens"] <= 1000 and examples["docs"]  # docs take what is left
    assert len(retrieval.prompt_examples(library, query, k=5, budget=100_000)["kernels"]) == 3
    assert retrieval.prompt_examples(library, query, budget=0) == {
        "kernels": [],
        "docs": [],
        "tokens": 0,
    }


def test_the_settings_come_from_the_environment(library: Library, monkeypatch) -> None:
    for i in range(3):
        library.add(entry(f"level1/{30 + i}_Softmax", LOG_SOFTMAX))
    monkeypatch.setenv(retrieval.K_VAR, "3")
    assert len(retrieval.prompt_examples(library, softmax_query())["kernels"]) == 3
    monkeypatch.setenv(retrieval.TOKENS_VAR, "0")
    assert retrieval.prompt_examples(library, softmax_query())["kernels"] == []


# ---------------------------------------------------------------- persistence


def test_the_library_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        kernel_id, added = Library(store).add(entry("level1/24_LogSoftmax", LOG_SOFTMAX))
        assert added
    with RunStore(path) as store:
        library = Library(store)
        assert library.add(entry("level1/24_LogSoftmax", LOG_SOFTMAX)) == (kernel_id, False)
        assert library.count() == 1
        assert [h["id"] for h in retrieval.rank_kernels(library, softmax_query())] == [kernel_id]
        assert library.get(kernel_id[:6])["code"].startswith("import torch")
    with sqlite3.connect(path) as conn:  # FTS5 in the store's own file
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "library_kernels", "library_docs", "library_kernels_fts"} <= tables


def test_kernels_kept_before_the_fts_tables_existed_become_searchable(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        kernel_id, _ = Library(store).add(entry("level1/24_LogSoftmax", LOG_SOFTMAX))
    with sqlite3.connect(path) as conn:  # as a Python without FTS5 would have left it
        conn.execute("DROP TABLE library_kernels_fts")
    with RunStore(path) as store:
        hits = retrieval.rank_kernels(Library(store), softmax_query())
    assert [h["id"] for h in hits] == [kernel_id]


def test_docs_are_indexed_once_per_content(library: Library, tmp_path: Path, monkeypatch) -> None:
    docs = tmp_path / "dsl"
    shutil.copytree(
        prompts.DSL_DIR / "triton", docs / "triton", ignore=shutil.ignore_patterns("examples")
    )
    monkeypatch.setattr(prompts, "DSL_DIR", docs)
    files = len(list((docs / "triton").glob("*.md")))
    assert retrieval.ensure_docs(library, "triton") == files
    sections = library.doc_count("triton")
    assert sections > files and retrieval.ensure_docs(library, "triton") == 0
    assert library.doc_count("triton") == sections
    pitfalls = docs / "triton" / "pitfalls.md"
    pitfalls.write_text("# Triton: pitfalls\n\n- Only one: the zebra pitfall.\n")
    assert retrieval.ensure_docs(library, "triton") == 1
    hits = library.search_docs(retrieval.fts_match("zebra"), "triton")
    assert [(h["title"], h["body"]) for h in hits] == [
        ("Triton: pitfalls", "- Only one: the zebra pitfall.")
    ]
    assert library.doc_count("triton") < sections  # the old version's sections are gone


def test_doc_sections_split_at_headings_paragraphs_and_items() -> None:
    text = (
        "# Title\n\nIntro line one\nline two.\n\n```python\nx = 1\n\n# not a heading\n```\n\n"
        "Memory\n- `tl.load`: masked\n  continued.\n- `tl.store`\n\n## Sub\n\n1. first\n2. second\n"
    )
    assert retrieval.doc_sections(text) == [
        ("Title", "Intro line one\nline two."),
        ("Title", "```python\nx = 1\n\n# not a heading\n```"),
        ("Title / Memory", "- `tl.load`: masked\n  continued."),
        ("Title / Memory", "- `tl.store`"),
        ("Sub", "1. first"),
        ("Sub", "2. second"),
    ]


def test_export_then_import_round_trips(tmp_path: Path) -> None:
    with RunStore(tmp_path / "a.db") as store:
        source = Library(store)
        for item in (entry("level1/24_LogSoftmax", LOG_SOFTMAX), entry("level1/1_Matmul", GEMM)):
            source.add(item)
        exported = list(source.export())
    with RunStore(tmp_path / "b.db") as store:
        target = Library(store)
        entries = [LibraryEntry.model_validate(e) for e in exported]
        assert target.import_entries(entries) == (2, 0)
        assert target.import_entries(entries) == (0, 2)
        assert list(target.export()) == exported
        assert (
            retrieval.rank_kernels(target, softmax_query())[0]["task_name"]
            == "level1/24_logsoftmax"
        )


# ---------------------------------------------------------------- level 3: embeddings


class FakeEmbeddings:
    """Vectors that point one way for texts holding `prefer`, another for the rest; the query's
    the first way (no network)."""

    model = "fake-embedding"

    def __init__(self, prefer: str = "", fail: bool = False) -> None:
        self.prefer, self.fail, self.documents = prefer, fail, 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.fail:
            raise ConnectionError("no endpoint")
        self.documents += len(texts)
        return [[1.0 if self.prefer in t else 0.0, 1.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        if self.fail:
            raise ConnectionError("no endpoint")
        return [1.0, 0.0]


def test_embeddings_rerank_each_tier_and_are_kept(library: Library) -> None:
    for item in (
        entry("level1/25_Softmax_plain", LOG_SOFTMAX, note="softmax " * 6),
        entry("level1/24_LogSoftmax", LOG_SOFTMAX),
        entry("level1/1_Matmul", GEMM),
    ):
        library.add(item)
    query = softmax_query()
    flat = [h["id"] for h in retrieval.rank_kernels(library, query)]
    second = library.get(flat[1])
    fake = FakeEmbeddings(prefer=second["task_name"])
    hits = retrieval.rank_kernels(library, query, embedder=fake)
    assert [h["id"] for h in hits] == [flat[1], flat[0], *flat[2:]]
    assert hits[0]["similarity"] > hits[1]["similarity"] and hits[1]["tier"] == 0
    made = fake.documents
    assert made == len(flat)
    again = retrieval.rank_kernels(library, query, embedder=fake)
    assert [(h["id"], h["similarity"]) for h in again] == [(h["id"], h["similarity"]) for h in hits]
    assert fake.documents == made  # the vectors are kept, not made again
    with Library(library.store)._session() as s:
        assert s.get(LibraryKernel, flat[0]).embedding_model == "fake-embedding"
    failing = retrieval.rank_kernels(library, query, embedder=FakeEmbeddings(fail=True))
    assert [h["id"] for h in failing] == flat  # an endpoint down: BM25's order


def test_embeddings_need_a_model_name(monkeypatch) -> None:
    monkeypatch.delenv(retrieval.EMBEDDING_MODEL_VAR, raising=False)
    assert retrieval.embedder_from_env() is None
    monkeypatch.setenv(retrieval.EMBEDDING_MODEL_VAR, "text-embedding-3-small")
    monkeypatch.setenv(retrieval.EMBEDDING_URL_VAR, "http://127.0.0.1:9/v1")
    embedder = retrieval.embedder_from_env()
    assert embedder is not None and embedder.model == "text-embedding-3-small"


# ---------------------------------------------------------------- the coder's prompt


def coder_context(library_examples: dict | None) -> dict:
    """What nodes/coder.py passes for a first write (the task: prompt_example_rmsnorm)."""
    return {
        "task_source": RMSNORM_TASK.read_text(),
        "analysis": {},
        "dsl": "triton",
        "device": "cuda",
        "policy": "strict",
        "precision": "fp32",
        "hardware": "",
        "plan": {"summary": "rmsnorm"},
        "dsl_docs": prompts.dsl_docs("triton"),
        "sketch": {},
        "mode": "write",
        "previous_code": None,
        "failure": None,
        "profile": None,
        "best": None,
        "feedback": None,
        "allow_edit": False,
        "retrieved": library_examples,
    }


RMS = analysis(
    [
        op("pow", "pointwise"),
        op("mean", "reduction"),
        op("rsqrt", "pointwise"),
        op("mul", "pointwise"),
    ],
    [stage("norm", [0, 1, 2, 3], None, "rms_norm")],
)
LAYERNORM = analysis([op("native_layer_norm", "norm")], [stage("norm", [0], 0)])


def test_the_coder_prompt_shows_a_similar_kernel_and_never_the_same_tasks(store, library) -> None:
    task = TaskSource.read(RMSNORM_TASK)
    same = entry("prompt_example_rmsnorm", RMS, note="THE SAME TASK", task_hash=task.hash,
                 source_hash=task_hash(task.source, {}))  # fmt: skip
    similar = entry("level1/40_LayerNorm", LAYERNORM, note="A LAYERNORM KERNEL", kernel_ms=0.0123)
    for item in (same, similar, entry("level1/1_Matmul", GEMM, note="A GEMM KERNEL")):
        library.add(item)
    config = RunConfig(
        task_path=str(RMSNORM_TASK), dsl="triton", device="cuda", model={"name": "x"}
    )
    ctx = SimpleNamespace(brain=object(), config=config, store=store, task=lambda: task)
    examples = retrieved(ctx, RMS)
    user = prompts.render("coder", **coder_context(examples))[1]["content"]
    assert "## Verified kernels of similar tasks" in user
    assert "### Example 1: level1/40_layernorm (norm), triton on cuda" in user
    assert "- Measured: 12.3 us, 1.5x eager, 40% of speed of light." in user
    assert "# A LAYERNORM KERNEL" in user and "THE SAME TASK" not in user
    assert "A GEMM KERNEL" not in user  # no op in common with the task
    assert "## The triton notes that bear most on this task" in user
    assert prompts.render("coder", **coder_context(retrieved(ctx, RMS))) == prompts.render(
        "coder", **coder_context(examples)
    )  # deterministic for one library state
    assert user.index("## Sketch") < user.index("## Verified kernels") < user.index("## What to do")


def test_no_library_section_without_examples_or_for_the_builtin(store) -> None:
    for examples in (None, {"kernels": [], "docs": [], "tokens": 0}):
        user = prompts.render("coder", **coder_context(examples))[1]["content"]
        assert "Verified kernels" not in user and "notes that bear most" not in user
    from kernelgraph.nodes.brain import BuiltinBrain

    ctx = SimpleNamespace(brain=BuiltinBrain(store, "r-x"), store=store)
    assert retrieved(ctx, RMS) is None


# ---------------------------------------------------------------- the command line


def test_the_library_commands(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with RunStore(db) as store:
        library = Library(store)
        for item in (entry("level1/24_LogSoftmax", LOG_SOFTMAX), entry("level1/1_Matmul", GEMM)):
            library.add(item)
        softmax_id = entry("level1/24_LogSoftmax", LOG_SOFTMAX).id

    def run(*args: str):
        return kernelgraph("library", *args, "--db", str(db), cwd=tmp_path)

    rows = json_line(run("list", "--dsl", "triton", "--json"))
    assert sorted(r["task_name"] for r in rows) == ["level1/1_matmul", "level1/24_logsoftmax"]
    assert "code" not in rows[0] and "embedding" not in rows[0]
    shown = json_line(run("show", softmax_id[:8], "--json"))
    assert shown["id"] == softmax_id and "class ModelNew" in shown["code"]
    plain = run("show", softmax_id)
    assert plain.returncode == 0 and plain.stdout.startswith("import torch")
    found = json_line(run("search", "softmax", "--dsl", "triton", "--k", "1", "--json"))
    assert found["category"] == "softmax" and [h["id"] for h in found["kernels"]] == [softmax_id]
    assert found["docs"] and all(d["path"].startswith("triton/") for d in found["docs"])
    assert "code" not in found["kernels"][0]
    assert run("search", "softmax").returncode == 0

    out = tmp_path / "library.jsonl"
    assert json_line(run("export", str(out), "--json")) == {"exported": 2, "file": str(out)}
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == sorted(
        r["id"] for r in rows
    )
    other = tmp_path / "other.db"
    twice = [
        kernelgraph("library", "import", str(out), "--db", str(other), "--json", cwd=tmp_path)
        for _ in range(2)
    ]
    assert [json_line(p)["added"] for p in twice] == [2, 0]
    assert json_line(twice[1])["already_kept"] == 2

    missing = run("show", "k-nothing", "--json")
    assert missing.returncode == 2 and json_line(missing)["kind"] == "usage"
    assert_readable_error(missing, "no kernel 'k-nothing' in the library")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"code": "x"}\n')
    refused = run("import", str(bad))
    assert refused.returncode == 2
    assert_readable_error(refused, "bad.jsonl:1 is not a library kernel")


# ---------------------------------------------------------------- a real run learns


def test_a_run_adds_its_verified_kernel_and_the_next_task_sees_it(tmp_path: Path) -> None:
    agent = Agent(tmp_path)
    script = write_script(tmp_path, [kernel("cpp_scale_add")])
    first = summary_of(agent.run(script, "--max-iterations", "1", "--record"))
    assert first["status"] == "verified"
    with RunStore(agent.db) as store:
        rows = Library(store).list_kernels()
    assert len(rows) == 1
    row = rows[0]
    assert (row["task_name"], row["dsl"], row["device"], row["run_id"]) == (
        "scale_add", "cpp", "cpu", first["run_id"],
    )  # fmt: skip
    assert row["candidate_id"] == first["best"]["candidate_id"]
    assert row["speedup_vs_eager"] == pytest.approx(first["best"]["speedup_vs_eager"])
    assert row["task_hash"] == TaskSource.read(TASK).hash and "ops: mul add" in row["signature"]

    # another task (the same operator with a constant changed) is shown that kernel; the
    # first run, on its own task, was not
    other = tmp_path / "scale_add_wide.py"
    other.write_text(TASK.read_text().replace("COLS = 256", "COLS = 512"))
    second = summary_of(agent.run(script, "--max-iterations", "1", "--record", task=other))
    prompts_of = {
        run_id: agent.query(
            "SELECT b.content FROM llm_calls c JOIN blobs b ON b.sha256 = c.prompt_blob "
            "WHERE c.run_id = ? AND c.node = 'coder'",
            run_id,
        )[0][0]
        for run_id in (first["run_id"], second["run_id"])
    }
    assert "Verified kernels of similar tasks" not in prompts_of[first["run_id"]]
    assert "Verified kernels of similar tasks" in prompts_of[second["run_id"]]
    assert "y[i] = x[i] * 2.0f + 1.0f;" in prompts_of[second["run_id"]]
    assert agent.query("SELECT count(*) FROM library_kernels")[0][0] == 2
