"""`kernelgraph library list|show|search|export|import`: the kernel library (state/library.py),
the verified kernels every run adds and the coder retrieves (tools/retrieval/).

--json: stdout carries one JSON line (a list for `list`); all else goes to stderr. Errors are one
readable line (exit 2): an unknown id, an unreadable or malformed export file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kernelgraph.graph.cli_options import app, err
from kernelgraph.graph.cli_run import DbOpt, JsonOpt
from kernelgraph.tools.harness.verdict import UsageError

library_app = typer.Typer(
    no_args_is_help=True,
    help="The kernel library: every run's verified kernels, which the LLM coder retrieves.",
)
app.add_typer(library_app, name="library")

DslFilter = Annotated[
    str | None, typer.Option("--dsl", help="Only kernels in this kernel language.")
]
DeviceFilter = Annotated[
    str | None, typer.Option("--device", help="Only kernels verified on this device kind.")
]


def _library(db: Path | None):
    from kernelgraph.state.library import Library
    from kernelgraph.state.store import open_store

    return Library(open_store(db))


def _figure(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


@library_app.command("list")
def list_kernels(
    dsl: DslFilter = None,
    device: DeviceFilter = None,
    limit: Annotated[int | None, typer.Option(help="At most this many.")] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the library's kernels, newest first (the id is the first column)."""
    rows = _library(db).list_kernels(dsl, device, limit)
    if as_json:
        print(json.dumps(rows, default=str))
        return
    table = Table("id", "task", "category", "dsl", "device", "ms", "x eager", "% SOL")
    for row in rows:
        table.add_row(
            row["id"],
            row["task_name"],
            row["category"],
            row["dsl"],
            row["device_name"] or row["device"],
            _figure(row["kernel_ms"], "{:.4g}"),
            _figure(row["speedup_vs_eager"], "{:.3g}"),
            _figure(row["sol_pct"], "{:.3g}"),
        )
    Console().print(table)
    err.print(f"{len(rows)} kernel(s)")


@library_app.command()
def show(
    kernel_id: Annotated[str, typer.Argument(help="A kernel id, or the start of one.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a kernel: its task, figures and code."""
    try:
        row = _library(db).get(kernel_id)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    if row is None:
        raise UsageError(f"no kernel {kernel_id!r} in the library (see kernelgraph library list)")
    if as_json:
        print(json.dumps(row, default=str))
        return
    for key in ("id", "task_name", "category", "dsl", "device", "device_name", "precision",
                "policy", "kernel_ms", "speedup_vs_eager", "sol_pct", "run_id", "candidate_id",
                "task_hash", "created_at"):  # fmt: skip
        err.print(f"{key}: {row[key]}", highlight=False)
    err.print(f"signature:\n{row['signature']}\n", highlight=False)
    print(row["code"], end="" if row["code"].endswith("\n") else "\n")


@library_app.command()
def search(
    query: Annotated[str, typer.Argument(help="Words: ops, a category, a task's name...")],
    dsl: DslFilter = None,
    device: DeviceFilter = None,
    k: Annotated[int, typer.Option("--k", min=1, help="How many kernels.")] = 5,
    docs: Annotated[int, typer.Option(min=0, help="How many doc sections (needs --dsl).")] = 3,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rank kernels (and, with --dsl, doc sections) for a query, as the coder's retrieval does.

    Kernels of the category the words name come first, then BM25 decides."""
    from kernelgraph.tools import retrieval

    library = _library(db)
    query_ = retrieval.text_query(query, dsl, device)
    kernels = retrieval.rank_kernels(
        library, query_, limit=k, embedder=retrieval.embedder_from_env()
    )
    sections = retrieval.rank_docs(library, query, dsl, docs) if dsl and docs else []
    if as_json:
        found = [{key: v for key, v in hit.items() if key != "code"} for hit in kernels]
        data: dict[str, Any] = {"query": query, "category": query_.category or None}
        print(json.dumps(data | {"kernels": found, "docs": sections}, default=str))
        return
    table = Table("id", "task", "category", "dsl", "device", "x eager", "% SOL", "score")
    for hit in kernels:
        table.add_row(
            hit["id"],
            hit["task_name"],
            hit["category"],
            hit["dsl"],
            hit["device"],
            _figure(hit["speedup_vs_eager"], "{:.3g}"),
            _figure(hit["sol_pct"], "{:.3g}"),
            f"{hit['score']:.3g}",
        )
    console = Console()
    console.print(table)
    for section in sections:
        console.print(f"[bold]{section['path']}[/]: {section['title']}", highlight=False)
        console.print(section["body"], markup=False, highlight=False)


@library_app.command("export")
def export_kernels(
    file: Annotated[Path, typer.Argument(help="The JSON-lines file to write.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write every kernel, with its code and figures, as one JSON line each."""
    count = 0
    try:
        with file.open("w") as out:
            for entry in _library(db).export():
                out.write(json.dumps(entry, sort_keys=True) + "\n")
                count += 1
    except OSError as exc:
        raise UsageError(f"cannot write {file}: {exc.strerror or exc}") from None
    if as_json:
        print(json.dumps({"exported": count, "file": str(file)}))
    err.print(f"wrote {count} kernel(s) to {file}")


@library_app.command("import")
def import_kernels(
    file: Annotated[Path, typer.Argument(help="A file `library export` wrote.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add the kernels of an export; those already kept are skipped (importing twice is safe)."""
    from pydantic import ValidationError

    from kernelgraph.state.library import LibraryEntry

    try:
        lines = file.read_text().splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entries.append(LibraryEntry.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise UsageError(
                f"{file}:{number} is not a library kernel ({where + ': ' if where else ''}"
                f"{first['msg']}); nothing was imported"
            ) from None
    added, known = _library(db).import_entries(entries)
    if as_json:
        print(json.dumps({"added": added, "already_kept": known, "file": str(file)}))
    err.print(f"added {added} kernel(s) from {file}; {known} already kept")
