"""Readable terminal output for verdicts and compile reports (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kernelgraph.tools.harness.verdict import Verdict

STATUS_STYLE = {"passed": "bold green", "incorrect": "bold yellow", "compile_error": "bold yellow"}


def _fmt(value, spec: str = ".4f", suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def render_verdict(console: Console, verdict: Verdict) -> None:
    style = STATUS_STYLE.get(verdict.status, "bold red")
    console.print(f"[{style}]{verdict.status}[/]  {verdict.message}", highlight=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("check")
    table.add_column("", width=2)
    table.add_column("detail", overflow="fold")
    for check in verdict.checks:
        mark = "[green]✓[/]" if check.passed else "[red]✗[/]"
        table.add_row(check.name, mark, check.detail.splitlines()[0] if check.detail else "")
    console.print(table)
    if verdict.failure and verdict.failure.message.count("\n"):
        console.print(verdict.failure.message, highlight=False, markup=False)
    t = verdict.timing
    if t.kernel_ms is not None:
        console.print(
            f"kernel {_fmt(t.kernel_ms)} ms (±{_fmt(t.spread_pct, '.1f')}% IQR, {t.iterations} runs, "
            f"{t.timer})  eager {_fmt(t.eager_ms)} ms  torch.compile {_fmt(t.torch_compile_ms)} ms",
            highlight=False,
        )
        console.print(
            f"speedup {_fmt(t.speedup_vs_eager, '.2f', 'x')} vs eager, "
            f"{_fmt(t.speedup_vs_compile, '.2f', 'x')} vs torch.compile; "
            f"{_fmt(verdict.sol_pct, '.1f', '%')} of speed-of-light "
            f"({verdict.sol.get('bound', '?')}-bound)",
            highlight=False,
        )
    for extra in verdict.extra_shapes:
        mark = {True: "[green]✓[/]", False: "[red]✗[/]"}.get(extra.get("passed"), "-")
        sizes = ", ".join(f"{k}={v}" for k, v in extra["sets"].items())
        console.print(
            f"extra shape {extra['variant']} ({sizes}): {mark} {extra['message']}", highlight=False
        )
    for warning in verdict.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if verdict.cached:
        console.print("[dim](cached result: --no-cache evaluates again)[/]")


def render_compile(console: Console, report: dict) -> None:
    if report.get("ok"):
        kernels = ", ".join(report.get("kernels", [])) or "—"
        artifacts = ", ".join(f"{k} {v} B" for k, v in report.get("artifacts", {}).items())
        console.print(
            f"[bold green]compiled[/] for {report.get('target')}: {kernels} ({artifacts})"
        )
    else:
        console.print(
            f"[bold red]compile failed[/] for {report.get('target')} ({report.get('stage')}):"
        )
        console.print(report.get("message", ""), highlight=False, markup=False)


def render_doctor(console: Console) -> None:
    import torch

    from kernelgraph.tools.dsl import get_adapter, names
    from kernelgraph.tools.harness.sandbox import isolation

    iso = isolation()
    console.print(f"torch {torch.__version__}; CUDA available: {torch.cuda.is_available()}")
    if torch.cuda.is_available():
        console.print(f"GPU: {torch.cuda.get_device_name(0)}")
    for name in names():
        adapter = get_adapter(name)
        console.print(
            f"dsl {name}: devices {', '.join(adapter.devices)}; version {adapter.version() or 'not installed'}"
        )
    console.print(
        f"sandbox: {iso.method}; secrets protected: {iso.secrets_protected}; network off: {iso.network_off}"
    )
    if iso.note:
        console.print(f"[yellow]{iso.note}[/]")
