"""The `kernelgraph` command line.

Contracts: with --json, stdout carries exactly one JSON object on one line, last; everything else
goes to stderr. Exit codes for evaluate: 0 passed, 1 any other verdict, 2 bad usage or an invalid
task, 3 the harness failed (the machine, not the task or the kernel: try again); for the agent
commands see graph/cli_run.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from sqlalchemy.exc import DatabaseError as SQLAlchemyDatabaseError

from kernelgraph.graph.cli_options import (
    DslOpt,
    KernelArg,
    MaxHostMemoryOpt,
    PolicyOpt,
    SetOpt,
    ShareWeightsOpt,
    TaskArg,
    app,
    default_device,
    err,
)
from kernelgraph.graph.report import render_compile, render_verdict
from kernelgraph.graph.summary import sentences
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.verdict import HarnessError, TaskError, UsageError
from kernelgraph.tools.task import TaskSource, parse_sets


@app.command()
def evaluate(
    task: TaskArg,
    kernel: KernelArg,
    dsl: DslOpt,
    device: Annotated[
        str | None, typer.Option(help="cpu or cuda (default: cuda if present).")
    ] = None,
    seeds: Annotated[int, typer.Option(help="Input seeds to verify on.")] = 3,
    set_: SetOpt = None,
    precision: Annotated[
        str,
        typer.Option(
            help="fp32 (1e-4; PyTorch's default: cuDNN convolutions may use TF32), ieee (1e-4, TF32 off), tf32 (1e-3), fp16 or bf16 (1e-2)."
        ),
    ] = "fp32",
    policy: PolicyOpt = "strict",
    extra_shapes: Annotated[
        bool,
        typer.Option("--extra-shapes", help="Also verify at other sizes (reported separately)."),
    ] = False,
    baseline_compile: Annotated[
        bool, typer.Option("--baseline-compile", help="Also time torch.compile.")
    ] = False,
    no_profile: Annotated[
        bool, typer.Option("--no-profile", help="Verify only; skip timing.")
    ] = False,
    timeout: Annotated[
        float, typer.Option(help="Wall-clock limit per harness process, seconds.")
    ] = 300.0,
    threads: Annotated[
        int, typer.Option(help="CPU threads for kernel and eager alike (0: all cores).")
    ] = 0,
    max_host_memory: MaxHostMemoryOpt = None,
    share_weights: ShareWeightsOpt = False,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Evaluate again even if cached.")
    ] = False,
    store: Annotated[
        bool, typer.Option("--store", help="Record the evaluation in the run store.")
    ] = False,
    db: Annotated[
        Path | None,
        typer.Option(help="Run store path (default ./runs/kernelgraph.db or $KERNELGRAPH_DB)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON line on stdout (all else on stderr).")
    ] = False,
) -> None:
    """Verify and profile a hand-written kernel against a task."""
    from kernelgraph.tools.harness.evaluate import evaluate as run_evaluation

    config = EvalConfig(
        dsl=dsl,
        device=device or default_device(),
        seeds=seeds,
        sets=parse_sets(set_),
        precision=precision,
        policy=policy,
        extra_shapes=extra_shapes,
        baseline_compile=baseline_compile,
        profile=not no_profile,
        timeout_s=timeout,
        threads=threads,
        max_host_gb=max_host_memory,
        share_weights=share_weights,
    )
    with err.status(f"evaluating {kernel} ({dsl} on {config.device})"):
        verdict = run_evaluation(task, kernel, config, use_cache=not no_cache)
    if store:
        _record(db, task, kernel, config, verdict)
    if as_json:
        print(json.dumps(verdict.to_dict(), default=repr))
    else:
        render_verdict(Console(), verdict)
    raise typer.Exit(0 if verdict.passed else 1)


@app.command("compile")
def compile_check(
    task: TaskArg,
    kernel: KernelArg,
    dsl: DslOpt,
    target: Annotated[
        str, typer.Option(help="Target to compile for, e.g. sm_90a or cpu.")
    ] = "sm_90a",
    set_: SetOpt = None,
    policy: PolicyOpt = "strict",
    timeout: Annotated[float, typer.Option(help="Wall-clock limit, seconds.")] = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON line on stdout.")] = False,
) -> None:
    """Compile a kernel for an explicit target without needing that device."""
    from kernelgraph.tools.harness.compile_only import compile_only

    with err.status(f"compiling {kernel} for {target}"):
        report = compile_only(task, kernel, dsl, target, parse_sets(set_), timeout, policy)
    if as_json:
        print(json.dumps(report, default=repr))
    else:
        render_compile(Console(), report)
    raise typer.Exit(0 if report.get("ok") else 1)


@app.command()
def doctor() -> None:
    """Show what this machine offers: devices, DSLs and sandbox isolation."""
    from kernelgraph.graph.report import render_doctor

    render_doctor(Console())


def _record(db: Path | None, task: Path, kernel: Path, config: EvalConfig, verdict) -> None:
    from kernelgraph.state.store import open_store

    store = open_store(db)
    run_id = store.create_run(
        kind="evaluate",
        task_path=str(task),
        task_hash=TaskSource.read(task, config.sets).hash,
        dsl=config.dsl,
        device=config.device,
        config=config.key_material(),
    )
    candidate = store.add_candidate(
        kernel.read_text(), config.dsl, run_id=run_id, label=kernel.name
    )
    store.record_evaluation(candidate, verdict.to_dict())
    store.set_run_status(run_id, verdict.status)
    err.print(f"recorded as run {run_id} in {store.path}")


INTERRUPTED = (
    "interrupted. A run whose id was printed above is resumable: kernelgraph resume RUN_ID "
    "(kernelgraph runs lists them)."
)
EXIT_GRACE_S = 10.0  # past this, exit leaves behind threads that would hold it forever


def entry() -> None:
    """The `kernelgraph` program (console script and `python -m`): main() with an exit that
    cannot hang. In-process callers use main()."""
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        leave_within(EXIT_GRACE_S, code)
        raise


def leave_within(seconds: float, code: int) -> None:
    """Exit with `code` at the latest `seconds` from now. Python's exit joins every non-daemon
    thread first, and a signal that lands while a thread pool starts a worker (between the
    thread's start and its registration) leaves one waiting for work forever: a SIGTERM'd run
    then printed its summary and never exited (2 of 175 kills in a sweep, 0.01-0.02 s in)."""

    def hard_exit() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)

    timer = threading.Timer(seconds, hard_exit)
    timer.daemon = True  # a clean exit does not wait for it
    timer.start()


def main() -> None:
    from pydantic import ValidationError

    from kernelgraph.graph.errors import RunError

    try:
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except (TaskError, UsageError, RunError, ValidationError) as exc:
        message = _validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
        _fail(message, {TaskError: "invalid_task", RunError: "run"}.get(type(exc), "usage"), 2)
    except HarnessError as exc:  # the machine's fault: trying again may well work
        what = f"the harness failed (the machine, not the task or the kernel): {exc}"
        _fail(sentences(what, "Try again, on a less loaded machine if it repeats."), "harness", 3)
    except (sqlite3.DatabaseError, SQLAlchemyDatabaseError) as exc:
        first = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        if _busy(first):  # held past the busy timeout: a loaded machine, not a broken file
            _fail(_busy_message(first), "database_busy", 3)
        message = (
            f"the run database cannot be used ({first}). If another kernelgraph process holds "
            f"it, wait and try again; if the file is corrupt, move it aside or point --db / "
            f"KERNELGRAPH_DB at another file."
        )
        _fail(message, "database", 2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:  # before a run could record its stop (one that did exits 3)
        _fail(INTERRUPTED, "interrupted", 130)
    except Exception as exc:  # noqa: BLE001 - one readable line instead of a traceback
        if isinstance(exc, typer.Abort):
            sys.exit(130)
        if isinstance(exc, typer.TyperException) and hasattr(exc, "show"):  # bad usage
            exc.show()
            if "--json" in sys.argv:
                print(json.dumps({"error": str(exc), "kind": "usage"}))
            sys.exit(2)
        if os.environ.get("KERNELGRAPH_DEBUG"):
            raise
        from kernelgraph.nodes.llm.openai_chat import scrub

        saved = _save_traceback(exc)
        where = (
            f"its traceback is in {saved}; report it with that file"
            if saved
            else "rerun with KERNELGRAPH_DEBUG=1 for the traceback and report it"
        )
        err.print(
            f"[bold red]internal error:[/] {escape(scrub(f'{type(exc).__name__}: {exc}'))}. This is a "
            f"kernelgraph bug; {where}.",
            highlight=False,
        )
        sys.exit(3)


def _save_traceback(exc: BaseException) -> Path | None:
    """The traceback of an internal error, kept in a file: a long GPU run that hit it once may
    not hit it again, and rerunning it just to see the traceback is costly. Keys are masked."""
    import time
    import traceback

    from kernelgraph.nodes.llm.openai_chat import scrub
    from kernelgraph.tools.harness.cache import cache_root

    try:
        folder = cache_root() / "errors"
        folder.mkdir(exist_ok=True)
        path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
        text = f"kernelgraph {' '.join(sys.argv[1:])}\n\n" + "".join(
            traceback.format_exception(exc)
        )
        path.write_text(scrub(text))
        return path
    except OSError:
        return None


def _busy(error: str) -> bool:
    return "database is locked" in error or "database is busy" in error


def _busy_message(error: str) -> str:
    from kernelgraph.state.store import busy_timeout_ms

    return (
        f"the run database stayed locked for the whole {busy_timeout_ms() / 1000:g} s busy "
        f"timeout ({error}): other kernelgraph processes were writing to it, on a busy machine. "
        "Try again (a bench resumes such a run by itself); if it repeats, raise "
        "KERNELGRAPH_DB_TIMEOUT_S."
    )


def _fail(message: str, kind: str, code: int) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    if "--json" in sys.argv:  # the JSON contract holds for errors too
        print(json.dumps({"error": message, "kind": kind}))
    sys.exit(code)


def _validation_message(exc) -> str:
    parts = []
    for e in exc.errors():
        where = ".".join(str(x) for x in e["loc"])
        parts.append(f"{where}: {e['msg']}" if where else e["msg"])
    return "invalid setting: " + "; ".join(parts)


import kernelgraph.graph.bench.cli  # noqa: E402,F401  (registers bench and report on `app`)
import kernelgraph.graph.cli_inspect  # noqa: E402,F401  (registers run, resume, branch, ... on `app`)
import kernelgraph.graph.cli_library  # noqa: E402,F401  (registers library ... on `app`)

if __name__ == "__main__":
    entry()
