"""Whether the harness can verify and profile a task at its real size, whatever the builtin
model can write for it: a probe kernel runs the task's own forward and passes its outputs
through a Triton copy kernel, under `--policy hybrid` (library GEMMs and convolutions allowed).

This measures the harness (memory, sandbox, time at full size), not kernel speed: a task whose
forward needs more than library GEMMs and convolutions fails the policy check, and says so.
One JSON line per task (evaluated or not and why, status, wall time, phases, peak host and
device memory); tasks already in `--out` (by folder and file name, wherever the run started)
are skipped, so a run resumes:

    python benchmarks/harness_probe.py TASK.py... [--out FILE] [--timeout 300]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import emit

PROBE = '''

import triton
import triton.language as tl


@triton.jit
def _probe_copy(src, dst, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)


def _through_triton(t):
    t = t.contiguous()
    out = torch.empty_like(t)
    if t.numel():
        _probe_copy[(triton.cdiv(t.numel(), 4096),)](t, out, t.numel(), BLOCK=4096)
    return out


class ModelNew(Model):
    """Harness probe: the task's own forward, its outputs copied by a Triton kernel."""

    def forward(self, *args):
        out = super().forward(*args)
        if isinstance(out, tuple | list):
            return type(out)(_through_triton(o) for o in out)
        return _through_triton(out)
'''


def probe_kernel(task: Path, folder: Path) -> Path:
    """The probe for `task`: its source with ModelNew appended (standalone, like any kernel)."""
    kernel = folder / f"probe_{task.stem}.py"
    kernel.write_text(task.read_text() + PROBE)
    return kernel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", type=Path, nargs="+")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args()

    from kernelgraph.tools.harness.config import EvalConfig

    config = EvalConfig(dsl="triton", device=ns.device, policy="hybrid", timeout_s=ns.timeout)
    done = _done(ns.out)
    folder = Path(tempfile.mkdtemp(prefix="kg-probe-"))
    for task in ns.tasks:
        if _problem(task) not in done:
            emit(_probe(task, probe_kernel(task, folder), config), ns.out)


def _probe(task: Path, kernel: Path, config) -> dict:
    from kernelgraph.tools.harness.evaluate import evaluate
    from kernelgraph.tools.harness.verdict import HarnessError, TaskError, UsageError

    start = time.monotonic()
    record: dict = {"task": str(task), "problem": _problem(task)}
    try:
        verdict = evaluate(task, kernel, config, use_cache=True)
    except (TaskError, UsageError, HarnessError) as exc:
        kind = "harness_error" if isinstance(exc, HarnessError) else "task_error"
        return {**record, "evaluated": False, "reason": kind, "message": str(exc)[:1000],
                "wall_s": round(time.monotonic() - start, 1)}  # fmt: skip
    peaks = verdict.memory or {}
    device_peaks = [v for v in (peaks.get("peak_device_bytes") or {}).values() if v]
    host_peaks = [v for v in (peaks.get("peak_host_bytes") or {}).values() if v]
    return {
        **record,
        "evaluated": "candidate" in verdict.phases_s,  # its worker ran (not a static refusal)
        "status": verdict.status,
        "message": verdict.message[:500],
        "wall_s": round(time.monotonic() - start, 1),
        "kernel_ms": verdict.timing.kernel_ms,
        "eager_ms": verdict.timing.eager_ms,
        "peak_device_gib": round(max(device_peaks) / 2**30, 2) if device_peaks else None,
        "peak_host_gib": round(max(host_peaks) / 2**30, 2) if host_peaks else None,
        "reference": verdict.reference,
        "phases_s": verdict.phases_s,
    }


def _problem(task: Path) -> str:
    """The task's folder and file name: "level1/87_conv_pointwise_2D.py"."""
    task = Path(task).resolve()
    return f"{task.parent.name}/{task.name}"


def _done(out: Path | None) -> set[str]:
    if out is None or not out.exists():
        return set()
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return {record.get("problem") or _problem(Path(record["task"])) for record in records}


if __name__ == "__main__":
    main()
