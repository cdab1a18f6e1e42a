"""The agent commands: run, resume, branch, approve, reject, edit, history, runs, show, export,
delete, unlock.

--json: the last line of stdout is one JSON object (a list for `runs` and `history`); all else
goes to stderr. Exit codes: 0 verified, 1 no verified kernel, 2 bad usage or input (a run that
ends `task_error` included: its task cannot be used, resuming cannot help), 3 a resumable stop
(awaiting approval, interrupted: Ctrl-C, endpoint down, a harness failure).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Annotated

import typer

from kernelgraph.graph.cli_options import (
    MaxHostMemoryOpt,
    SetOpt,
    ShareWeightsOpt,
    TaskArg,
    app,
    default_device,
    err,
)
from kernelgraph.graph.progress import Progress
from kernelgraph.graph.summary import RunSummary
from kernelgraph.state.config import Limits, ModelConfig, Price, RunConfig
from kernelgraph.state.search import SearchSettings
from kernelgraph.tools.harness.verdict import UsageError
from kernelgraph.tools.task import parse_sets

RunArg = Annotated[str, typer.Argument(help="Run id (see `kernelgraph runs`).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON line on stdout, all else stderr.")]
DbOpt = Annotated[
    Path | None,
    typer.Option(help="Run store path (default ./runs/kernelgraph.db or $KERNELGRAPH_DB)."),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")]


def _int_or_none(name: str):
    return Annotated[int | None, typer.Option(name, help=f"Limit: {name.lstrip('-')}.")]


DEFAULT_DSL = {"cuda": "triton", "cpu": "cpp"}  # what the builtin writes best on each device


@app.command()
def run(
    task: TaskArg,
    dsl: Annotated[
        str | None,
        typer.Option(help="triton, cpp, cuda or tilelang (default: triton on cuda, cpp on cpu)."),
    ] = None,
    device: Annotated[
        str | None, typer.Option(help="cpu or cuda (default: cuda if present).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model name, script:FILE, or builtin. Default $KERNELGRAPH_MODEL."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint. Default $KERNELGRAPH_BASE_URL.")
    ] = None,
    cheap_model: Annotated[
        str | None, typer.Option(help="A cheaper model for --cheap-nodes.")
    ] = None,
    cheap_base_url: Annotated[
        str | None, typer.Option(help="Endpoint of the cheaper model.")
    ] = None,
    cheap_nodes: Annotated[
        str, typer.Option(help="Comma-separated nodes for the cheap model.")
    ] = "planner",
    price: Annotated[
        list[str] | None, typer.Option(help="MODEL=IN/OUT: USD per million tokens. Repeatable.")
    ] = None,
    record: Annotated[
        bool, typer.Option("--record", help="Store every LLM exchange for --replay.")
    ] = False,
    replay: Annotated[
        str | None, typer.Option(help="Answer from RUN's recorded exchanges.")
    ] = None,
    endpoint_retries: Annotated[
        int, typer.Option(help="Retries (with backoff) when the endpoint is down or busy.")
    ] = 4,
    request_timeout: Annotated[float, typer.Option(help="Seconds to wait for one reply.")] = 300.0,
    approve: Annotated[
        bool, typer.Option("--approve", help="Stop for a human at each verified candidate.")
    ] = False,
    set_: SetOpt = None,
    seeds: Annotated[int, typer.Option(help="Input seeds to verify on.")] = 3,
    precision: Annotated[
        str, typer.Option(help="fp32 (PyTorch's default TF32 flags), ieee, tf32, fp16 or bf16.")
    ] = "fp32",
    policy: Annotated[str, typer.Option(help="strict or hybrid.")] = "strict",
    timeout: Annotated[
        float, typer.Option(help="Wall-clock limit per harness process, s.")
    ] = 300.0,
    threads: Annotated[int, typer.Option(help="CPU threads (0: all cores).")] = 0,
    max_host_memory: MaxHostMemoryOpt = None,
    share_weights: ShareWeightsOpt = False,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache", help="Evaluate and analyse afresh: nothing cached earlier is used."
        ),
    ] = False,
    baseline_compile: Annotated[
        bool | None,
        typer.Option(
            "--baseline-compile/--no-baseline-compile",
            help="Time torch.compile too (default: on for cuda).",
        ),
    ] = None,
    prebuild: Annotated[
        int,
        typer.Option(
            help="On a GPU, configurations the builtin will try next that are compiled "
            "in parallel while one is timed (0: off)."
        ),
    ] = 2,
    max_iterations: Annotated[int, typer.Option(help="Candidates the coder may write.")] = 12,
    max_retries: Annotated[int, typer.Option(help="Consecutive failures before a new sketch.")] = 3,
    max_escalations: Annotated[int, typer.Option(help="New sketches after repeated failure.")] = 2,
    plateau_patience: Annotated[
        int,
        typer.Option(help="Profiled candidates (a search: rounds) without a gain before stopping."),
    ] = 3,
    min_gain_pct: Annotated[float, typer.Option(help="A gain smaller than this is no gain.")] = 2.0,
    sol_target_pct: Annotated[float, typer.Option(help="Stop at this % of speed-of-light.")] = 90.0,
    budget_usd: Annotated[
        float | None, typer.Option(help="Stop when LLM spend reaches this.")
    ] = None,
    max_llm_calls: _int_or_none("--max-llm-calls") = None,
    max_minutes: Annotated[
        float | None, typer.Option(help="Stop after this much running time.")
    ] = None,
    width: Annotated[
        int, typer.Option(min=1, help="Candidates per round, written and checked at once.")
    ] = 1,
    islands: Annotated[
        int, typer.Option(min=1, help="Subpopulations, each with its own sketch and best.")
    ] = 1,
    migrate_every: Annotated[
        int, typer.Option(min=1, help="Rounds between migrations of each island's best.")
    ] = 2,
    explore: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Chance a parent is any elite, not the fittest.")
    ] = 0.25,
    seed: Annotated[int, typer.Option(help="Seed of the search's choices (parents, starts).")] = 0,
    db: DbOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Turn a PyTorch reference into a verified, profiled kernel."""
    from kernelgraph.graph import runner

    device = device or default_device()
    dsl = dsl or DEFAULT_DSL.get(device.split(":")[0], "triton")
    name = f"replay:{replay}" if replay else (model or os.environ.get("KERNELGRAPH_MODEL"))
    config = RunConfig(
        task_path=str(task),
        sets=parse_sets(set_),
        dsl=dsl,
        device=device,
        seeds=seeds,
        precision=precision,
        policy=policy,
        timeout_s=timeout,
        threads=threads,
        max_host_gb=max_host_memory,
        share_weights=share_weights,
        baseline_compile=device.startswith("cuda")
        if baseline_compile is None
        else baseline_compile,
        no_cache=no_cache,
        prebuild=prebuild,
        approve=approve,
        model=ModelConfig(
            name=name,
            base_url=base_url or os.environ.get("KERNELGRAPH_BASE_URL"),
            cheap_name=cheap_model,
            cheap_base_url=cheap_base_url,
            cheap_nodes=[n.strip() for n in cheap_nodes.split(",") if n.strip()],
            prices=_prices(price),
            record=record,
            endpoint_retries=endpoint_retries,
            request_timeout_s=request_timeout,
        ),
        limits=Limits(
            max_iterations=max_iterations,
            max_retries=max_retries,
            max_escalations=max_escalations,
            plateau_patience=plateau_patience,
            min_gain_pct=min_gain_pct,
            sol_target_pct=sol_target_pct,
            budget_usd=budget_usd,
            max_llm_calls=max_llm_calls,
            max_minutes=max_minutes,
        ),
        search=SearchSettings(
            width=width, islands=islands, migrate_every=migrate_every, explore=explore, seed=seed
        ),
    )
    progress = Progress(quiet=quiet)

    def started(run_id: str) -> None:
        progress.run_started(run_id, f"{task} -> {dsl} on {device}")

    _finish(lambda: runner.start(config, db, progress, on_start=started), progress, as_json, db)


@app.command()
def resume(
    run_id: RunArg, db: DbOpt = None, as_json: JsonOpt = False, quiet: QuietOpt = False
) -> None:
    """Continue a run after a crash, a kill or a stop."""
    from kernelgraph.graph import runner

    progress = Progress(quiet=quiet)
    progress.run_started(run_id, "resuming")
    _finish(lambda: runner.resume(run_id, db, progress), progress, as_json, db)


@app.command()
def branch(
    run_id: RunArg,
    from_: Annotated[
        str, typer.Option("--from", help="Step number or checkpoint id (see history).")
    ],
    config: Annotated[
        list[str] | None,
        typer.Option(
            "--config", help="KEY=VALUE run setting (dsl, model, a limit...). Repeatable."
        ),
    ] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Fork a new run from an earlier step of RUN, with changed settings."""
    from kernelgraph.graph.branching import branch as do_branch

    progress = Progress(quiet=quiet)

    def started(new_id: str) -> None:
        progress.run_started(new_id, f"branch of {run_id} from step {from_}")

    changes = parse_sets(config)
    _finish(lambda: do_branch(run_id, from_, changes, db, progress, started), progress, as_json, db)


@app.command("approve")
def approve_cmd(
    run_id: RunArg, db: DbOpt = None, as_json: JsonOpt = False, quiet: QuietOpt = False
) -> None:
    """Accept the candidate waiting for review and keep running."""
    from kernelgraph.graph import runner

    progress = Progress(quiet=quiet)
    _finish(lambda: runner.approve(run_id, db, progress), progress, as_json, db)


@app.command()
def reject(
    run_id: RunArg,
    feedback: Annotated[str, typer.Option(help="What is wrong: goes to the coder.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Send the waiting candidate back to the coder with feedback."""
    from kernelgraph.graph import runner

    progress = Progress(quiet=quiet)
    _finish(lambda: runner.reject(run_id, feedback, db, progress), progress, as_json, db)


@app.command()
def edit(
    run_id: RunArg,
    kernel: Annotated[Path, typer.Option(help="Your kernel file (class ModelNew).")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Replace the waiting candidate with your kernel; it is verified, then the run goes on."""
    from kernelgraph.graph import runner

    progress = Progress(quiet=quiet)
    _finish(lambda: runner.edit(run_id, kernel, db, progress), progress, as_json, db)


def _prices(items: list[str] | None) -> dict[str, Price]:
    prices = {}
    for item in items or []:
        name, _, pair = item.rpartition("=")
        try:
            inp, out = (float(x) for x in pair.split("/"))
        except ValueError as exc:
            raise UsageError(
                f"--price expects MODEL=IN/OUT (USD per million tokens), got {item!r}"
            ) from exc
        if not name:
            raise UsageError(f"--price expects MODEL=IN/OUT, got {item!r}")
        prices[name] = Price(input=inp, output=out)
    return prices


def _finish(action, progress: Progress, as_json: bool, db: Path | None = None) -> None:
    """Run `action` with Ctrl-C/SIGTERM as a clean stop, print the summary, exit with its code."""
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        summary: RunSummary = action()
    finally:
        signal.signal(signal.SIGTERM, previous)
        progress.close()
    if summary.status == "awaiting_approval":  # the reviewer sees what waits, on stderr
        from kernelgraph.graph.inspect import show
        from kernelgraph.graph.report_run import render_show

        render_show(err, show(summary.run_id, db=db))
    if as_json:
        print(json.dumps(summary.contract()))
    else:
        from kernelgraph.graph.report_run import render_summary

        render_summary(summary)
    raise typer.Exit(summary.code())


def raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
