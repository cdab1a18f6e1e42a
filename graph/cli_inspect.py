"""Commands that look at runs: runs, history, show, export, delete, unlock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from kernelgraph.graph.cli_options import app, err
from kernelgraph.graph.cli_run import DbOpt, JsonOpt, RunArg


@app.command()
def runs(
    limit: Annotated[int | None, typer.Option(help="At most this many.")] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List runs, newest first (the id is the first column)."""
    from kernelgraph.graph.inspect import list_runs
    from kernelgraph.graph.report_run import render_runs

    rows = list_runs(db, limit)
    if as_json:
        print(json.dumps(rows))
    else:
        render_runs(Console(), rows)


@app.command()
def history(run_id: RunArg, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """List a run's checkpoints: step, checkpoint id, node, attempt, best so far."""
    from kernelgraph.graph.inspect import history as run_history
    from kernelgraph.graph.report_run import render_history

    rows = run_history(run_id, db)
    if as_json:
        print(json.dumps(rows))
    else:
        render_history(Console(), rows)


@app.command()
def show(
    run_id: RunArg,
    candidate: Annotated[
        str | None, typer.Option(help="A candidate id (default: the best).")
    ] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the best kernel, or any candidate, with its diff and check matrix."""
    from kernelgraph.graph.inspect import show as show_candidate
    from kernelgraph.graph.report_run import render_show

    data = show_candidate(run_id, candidate, db)
    if as_json:
        print(json.dumps(data, default=str))
    else:
        render_show(Console(), data)


@app.command()
def export(
    run_id: RunArg,
    out: Annotated[Path, typer.Option(help="Where to write the kernel.")],
    candidate: Annotated[
        str | None, typer.Option(help="A candidate id (default: the best).")
    ] = None,
    db: DbOpt = None,
) -> None:
    """Write the best kernel (or a candidate) to a file."""
    from kernelgraph.graph.inspect import export as export_kernel

    path = export_kernel(run_id, out, candidate, db)
    err.print(f"wrote {path}")


@app.command()
def delete(run_id: RunArg, db: DbOpt = None) -> None:
    """Remove a run: its checkpoints, candidates, evaluations and LLM records."""
    from kernelgraph.graph.inspect import delete as delete_run

    delete_run(run_id, db)
    err.print(f"deleted run {run_id}")


@app.command()
def unlock(run_id: RunArg, db: DbOpt = None) -> None:
    """Clear a run's lock held by a process on another host that is gone."""
    from kernelgraph.graph.inspect import unlock as unlock_run

    unlock_run(run_id, db)
    err.print(f"unlocked run {run_id}")
