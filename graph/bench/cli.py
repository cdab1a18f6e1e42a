"""`kernelgraph bench` (a whole suite, on every GPU of a box or a Ray cluster) and
`kernelgraph report RUN` (one run drawn). Exit codes of bench: 0 the bench is complete, 2 bad
usage, 3 interrupted (continue with --resume DIR)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Annotated

import typer

from kernelgraph.graph.cli_options import SetOpt, app, default_device, err
from kernelgraph.graph.cli_run import DEFAULT_DSL, raise_interrupt
from kernelgraph.state.bench import BenchSettings
from kernelgraph.tools.harness.verdict import UsageError


@app.command()
def bench(
    suite: Annotated[
        Path | None,
        typer.Argument(help="A KernelBench checkout, a level folder, or any folder of task files."),
    ] = None,
    only: Annotated[
        str | None,
        typer.Option(help="Comma-separated globs over problem names: '*Softmax*,level1/1_*'."),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue the bench in this folder; finished problems are skipped."),
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None,
        typer.Option(help="Two bench folders side by side, per problem (runs nothing)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Bench folder (default runs/bench-SUITE-TIME).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="builtin, a model name, or script:FILE.")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint.")] = None,
    dsl: Annotated[str | None, typer.Option(help="Default: triton on cuda, cpp on cpu.")] = None,
    device: Annotated[
        str | None, typer.Option(help="cpu or cuda (default: cuda if present).")
    ] = None,
    policy: Annotated[str, typer.Option(help="strict or hybrid.")] = "strict",
    precision: Annotated[str, typer.Option(help="fp32, ieee, tf32, fp16 or bf16.")] = "fp32",
    max_iterations: Annotated[int, typer.Option(help="Candidates per run.")] = 12,
    seeds: Annotated[int, typer.Option(help="Input seeds to verify on.")] = 3,
    set_: SetOpt = None,
    timeout: Annotated[float | None, typer.Option(help="Per harness process, s.")] = None,
    baseline_compile: Annotated[
        bool | None,
        typer.Option(
            "--baseline-compile/--no-baseline-compile",
            help="Time torch.compile too (default: as run, on for cuda).",
        ),
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Nothing cached earlier is used.")
    ] = False,
    budget_usd: Annotated[
        float | None, typer.Option(help="Per run: stop at this LLM spend.")
    ] = None,
    max_llm_calls: Annotated[int | None, typer.Option(help="Per run: LLM call budget.")] = None,
    max_minutes: Annotated[float | None, typer.Option(help="Per run: running time budget.")] = None,
    samples: Annotated[int, typer.Option(min=1, help="Runs per problem, for pass@k.")] = 1,
    width: Annotated[int, typer.Option(min=1, help="Per run: candidates per search round.")] = 1,
    islands: Annotated[int, typer.Option(min=1, help="Per run: search islands.")] = 1,
    gpus: Annotated[
        int | None, typer.Option(min=1, help="GPUs to use (default: all visible).")
    ] = None,
    ray: Annotated[
        str | None, typer.Option(help="Ray cluster address (or 'local'): one actor per GPU.")
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            min=1,
            help="Runs at once per GPU (they time in turn, and must fit its memory together), "
            "or on a CPU.",
        ),
    ] = 1,
    task_timeout: Annotated[
        float | None, typer.Option(help="Wall-clock cap per run, s (then it ends as timeout).")
    ] = None,
    db: Annotated[
        Path | None, typer.Option(help="Run store (default ./runs/kernelgraph.db).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON line on stdout.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress.")] = False,
) -> None:
    """Run every problem of a suite (each an ordinary run) and report pass rate, fast_p,
    geomean speedups and % of speed-of-light."""
    from kernelgraph.graph.bench.api import load_bench, resume_bench, start_bench
    from kernelgraph.graph.bench.executors import ExecutorOptions
    from kernelgraph.graph.bench.progress import BenchProgress

    if compare:
        _compare(*compare, as_json)
        return
    if (suite is None) == (resume is None):
        raise UsageError("bench: give a SUITE folder, or --resume DIR (or --compare DIR_A DIR_B)")
    device = device or default_device()
    progress = BenchProgress(quiet=quiet)
    if resume is not None:
        manifest = load_bench(resume).manifest
        options = ExecutorOptions(manifest.settings.device, gpus, ray, jobs)
        outcome = _interruptible(lambda: resume_bench(resume, options, progress))
    else:
        dsl = dsl or DEFAULT_DSL.get(device.split(":")[0], "triton")
        settings = BenchSettings(
            suite=str(suite.resolve()),
            only=[g for g in (only or "").split(",") if g.strip()],
            dsl=dsl, device=device, model=model or "builtin", policy=policy,
            precision=precision, max_iterations=max_iterations, samples=samples,
            task_timeout_s=task_timeout,
            run_args=run_args(
                dsl=dsl, device=device, model=model, base_url=base_url, policy=policy,
                precision=precision, max_iterations=max_iterations, seeds=seeds, sets=set_,
                timeout=timeout, baseline_compile=baseline_compile, no_cache=no_cache,
                budget_usd=budget_usd, max_llm_calls=max_llm_calls, max_minutes=max_minutes,
                width=width, islands=islands,
            ),
        )  # fmt: skip
        options = ExecutorOptions(device, gpus, ray, jobs)
        outcome = _interruptible(lambda: start_bench(settings, out, options, db, progress))
    _print_outcome(outcome, as_json)
    raise typer.Exit(3 if outcome.interrupted else 0)


def run_args(*, dsl, device, model, base_url, policy, precision, max_iterations, seeds, sets,
             timeout, baseline_compile, no_cache, budget_usd, max_llm_calls,
             max_minutes, width=1, islands=1) -> list[str]:  # fmt: skip
    """The `kernelgraph run TASK` options every problem gets."""
    args = ["--dsl", dsl, "--device", device, "--policy", policy, "--precision", precision]
    args += ["--max-iterations", str(max_iterations), "--seeds", str(seeds)]
    if baseline_compile is not None:
        args += ["--baseline-compile" if baseline_compile else "--no-baseline-compile"]
    optional = {
        "--model": model, "--base-url": base_url, "--timeout": timeout,
        "--budget-usd": budget_usd, "--max-llm-calls": max_llm_calls, "--max-minutes": max_minutes,
    }  # fmt: skip
    for flag, value in optional.items():
        args += [flag, str(value)] if value is not None else []
    for item in sets or []:
        args += ["--set", item]
    if width > 1 or islands > 1:  # a parallel search per problem
        args += ["--width", str(width), "--islands", str(islands)]
    return args + (["--no-cache"] if no_cache else [])


def _interruptible(action):
    """SIGTERM stops a bench as Ctrl-C does: running runs are interrupted, resumable."""
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        return action()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _print_outcome(outcome, as_json: bool) -> None:
    s = outcome.summary.overall
    md, html = outcome.reports or (None, None)
    if as_json:
        print(json.dumps({
            "folder": str(outcome.folder), "report_md": str(md), "report_html": str(html),
            "interrupted": outcome.interrupted, "ran": outcome.ran, "skipped": outcome.skipped,
            "elapsed_s": outcome.elapsed_s, "notes": outcome.notes,
            "summary": outcome.summary.model_dump(mode="json"),
        }))  # fmt: skip
        return
    geo = "—" if s.geomean_eager_all is None else f"{s.geomean_eager_all:.2f}x"
    err.print(
        f"{s.verified}/{s.problems} verified, fast_1 {s.fast_p_eager.get('1', 0):.0%}, geomean vs "
        f"eager {geo} (unsolved as 1.0x); ran {outcome.ran}, skipped {outcome.skipped} done "
        f"before, {outcome.elapsed_s:.0f} s",
        highlight=False,
    )
    for note in outcome.notes:
        err.print(note, highlight=False, markup=False)
    if outcome.interrupted:
        err.print(f"interrupted: continue with kernelgraph bench --resume {outcome.folder}")
    print(f"report: {md}\nreport: {html}")


def _compare(folder_a: Path, folder_b: Path, as_json: bool) -> None:
    from kernelgraph.graph.bench.api import load_bench
    from kernelgraph.graph.bench.metrics import compare
    from kernelgraph.graph.bench.report import render_compare_markdown

    a, b = load_bench(folder_a), load_bench(folder_b)
    rows = compare(a.results, b.results)
    if as_json:
        print(json.dumps({"a": str(folder_a), "b": str(folder_b), "rows": rows}))
        return
    print(render_compare_markdown(str(folder_a), str(folder_b), rows, a.summary, b.summary))


@app.command()
def report(
    run_id: Annotated[
        str, typer.Argument(help="Run id (see `kernelgraph runs`), or a bench folder.")
    ],
    out: Annotated[
        Path | None, typer.Option(help="HTML file (default runs/RUN/report.html).")
    ] = None,
    db: Annotated[Path | None, typer.Option(help="Run store path.")] = None,
) -> None:
    """Draw one run: its candidates over time, speedup per iteration, and the graph's edges.
    Given a bench folder (finished or not), write its report.md and report.html again."""
    from kernelgraph.graph.run_report import render_run_html, render_run_markdown, run_report_data

    if (Path(run_id) / "bench.json").is_file():
        _bench_report(Path(run_id))
        return

    data = run_report_data(run_id, db)
    path = out or Path("runs") / run_id / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_run_html(data))
    print(render_run_markdown(data))
    err.print(f"report: {path}")


def _bench_report(folder: Path) -> None:
    from kernelgraph.graph.bench.api import load_bench
    from kernelgraph.graph.bench.report import write_report

    outcome = load_bench(folder)
    md, html = write_report(folder, outcome.manifest, outcome.summary, outcome.results)
    print(md.read_text())
    err.print(f"report: {md} and {html}")
