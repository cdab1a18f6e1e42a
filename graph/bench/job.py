"""One bench job: a problem's sample run as an ordinary `kernelgraph run` (or `resume`) in its
own process group, on the GPU its worker owns, with a wall-clock cap. The run's own process
does all the work; this module only starts it, logs it and reads its result back from the run
store, so a bench worker (a thread here, a Ray actor elsewhere) never runs candidate code."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from kernelgraph import IMPORT_ROOT
from kernelgraph.graph.bench.folder import STARTED, append_line
from kernelgraph.state.bench import SampleResult
from kernelgraph.tools.harness.sandbox import die_with_parent

RUN_STARTED = re.compile(r"^run (\S+): ")
TERM_GRACE_S = 20.0  # a run given SIGTERM marks itself interrupted and stops its harness
_LIVE: set[subprocess.Popen] = set()  # runs of this process's jobs, for stop_live_runs
_LIVE_LOCK = threading.Lock()


@dataclass
class Job:
    """Everything a worker needs, JSON-able (it travels to Ray actors)."""

    problem: dict  # BenchProblem
    sample: int
    run_args: list[str]  # `kernelgraph run TASK` options, the same for every problem
    db: str
    folder: str  # the bench folder: logs/ and started.jsonl
    timeout_s: float | None = None
    resume_run_id: str | None = None  # an unfinished run of this job to continue
    peak_bytes: int | None = None  # estimated device-memory peak (memory_gate.py)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.problem['name']}#{self.sample}"

    def to_dict(self) -> dict:
        return asdict(self)


def command(job: Job) -> list[str]:
    tail = ["--json", "--quiet", "--db", job.db]
    if job.resume_run_id:
        return [sys.executable, "-m", "kernelgraph.graph.cli", "resume", job.resume_run_id, *tail]
    return [
        sys.executable,
        "-m",
        "kernelgraph.graph.cli",
        "run",
        job.problem["path"],
        *job.run_args,
        *tail,
    ]


def log_path(job: Job) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", job.problem["name"])
    return Path(job.folder) / "logs" / f"{safe}.s{job.sample}.log"


def note_started(job: Job, run_id: str) -> None:
    """Record the run id at once, so a killed bench resumes this run rather than redo it."""
    row = {"problem": job.problem["name"], "sample": job.sample, "run_id": run_id}
    append_line(Path(job.folder) / STARTED, row)


def execute(job: Job, worker: str) -> SampleResult:
    """Run the job to its end (or its cap) and return its result."""
    path = log_path(job)
    path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **job.env}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [IMPORT_ROOT, env.get("PYTHONPATH")]))
    start = time.monotonic()
    with open(path, "a") as log:
        log.write(f"$ {' '.join(command(job))}\n")
        log.flush()
        proc = subprocess.Popen(
            command(job), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, start_new_session=True, preexec_fn=_die_with_bench,
        )  # fmt: skip
        with _LIVE_LOCK:
            _LIVE.add(proc)
        run_ids: list[str] = [job.resume_run_id] if job.resume_run_id else []
        stdout: list[str] = []
        readers = [
            threading.Thread(target=_follow, args=(proc, log, job, run_ids), daemon=True),
            threading.Thread(target=lambda: stdout.extend(proc.stdout), daemon=True),
        ]
        for reader in readers:
            reader.start()
        timed_out = _wait(proc, job.timeout_s)
        for reader in readers:
            reader.join(timeout=30)
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    summary = _last_json("".join(stdout))
    run_id = summary.get("run_id") or (run_ids[0] if run_ids else None)
    result = SampleResult(
        problem=job.problem["name"],
        sample=job.sample,
        run_id=run_id,
        status="timeout" if timed_out else summary.get("status") or "crashed",
        stop_reason=summary.get("stop_reason") or summary.get("kind"),  # a CLI error's kind
        exit_code=proc.returncode,
        wall_s=round(time.monotonic() - start, 2),
        worker=worker,
        message=summary.get("message") or summary.get("error") or _tail(path),
    )
    if run_id:
        result = details(result, run_id, Path(job.db))
    return result


def stop_live_runs() -> None:
    """A bench stopping (Ctrl-C): each running run gets SIGTERM, marks itself interrupted and
    stops its harness; its worker thread then sees it end. Resuming the bench resumes them."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for proc in live:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + TERM_GRACE_S
    for proc in live:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def _die_with_bench() -> None:
    die_with_parent(signal.SIGTERM)  # the run stops cleanly, marked interrupted: resumable


def _follow(proc: subprocess.Popen, log, job: Job, run_ids: list[str]) -> None:
    """Copy the run's stderr into its log; note its run id as soon as it is printed."""
    assert proc.stderr is not None
    for line in proc.stderr:
        log.write(line)
        log.flush()
        match = RUN_STARTED.match(line)
        if match and not run_ids:
            run_ids.append(match.group(1))
            note_started(job, match.group(1))


def _wait(proc: subprocess.Popen, timeout_s: float | None) -> bool:
    """Wait for the run; past its cap stop its group (SIGTERM, then SIGKILL). True if capped."""
    try:
        proc.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        pass
    for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    return True


def _last_json(text: str) -> dict:
    lines = text.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def details(result: SampleResult, run_id: str, db: Path) -> SampleResult:
    """Fill in what the run store knows: the best kernel's timing and roofline against the
    run's one baseline, candidates, spend, and the time to the first verified candidate."""
    from kernelgraph.graph.inspect import live_status, run_state
    from kernelgraph.state.llm_calls import run_spend
    from kernelgraph.state.search import SearchSettings
    from kernelgraph.state.store import open_store

    with open_store(db) as store:
        run = store.get_run(run_id)
        if run is None:
            return result
        search = SearchSettings.model_validate((run.get("config") or {}).get("search") or {})
        state, _ = run_state(store, run_id, search)
        evaluations = store.evaluations_for_run(run_id)
        spend = run_spend(store, run_id)
        candidates = len(store.candidates_for_run(run_id))
    best = state.best
    by_id = {e["id"]: e for e in evaluations}
    verdict = (by_id.get(best.evaluation_id) or {}).get("verdict") or {} if best else {}
    sol = verdict.get("sol") or {}
    baseline = state.baseline
    update = {
        "candidates": candidates,
        "llm_calls": spend.get("llm_calls", 0),
        "tokens_in": spend.get("tokens_in", 0),
        "tokens_out": spend.get("tokens_out", 0),
        "usd": spend.get("usd"),
        "first_verified_s": _first_verified_s(run["created_at"], evaluations),
        "status": result.status if result.status != "crashed" else live_status(run),
    }
    if best is not None:
        update |= {
            "verified": True,
            "speedup_vs_eager": best.speedup_vs_eager,
            "speedup_vs_compile": best.speedup_vs_compile,
            "sol_pct": best.sol_pct,
            "kernel_ms": best.kernel_ms,
            "eager_ms": baseline.eager_ms if baseline else None,
            "compile_ms": baseline.compile_ms if baseline else None,
            "flops": sol.get("flops"),
            "bytes": sol.get("bytes"),
            "bound": sol.get("bound"),
            "peak_flops": sol.get("peak_flops"),
            "peak_bandwidth": sol.get("peak_bandwidth"),
            "cached": bool(verdict.get("cached") or (baseline and baseline.cached)),
        }
    return result.model_copy(update=update)


def _first_verified_s(run_created: str, evaluations: list[dict]) -> float | None:
    start = datetime.fromisoformat(run_created)
    for e in evaluations:
        if e["status"] == "passed":
            return round((datetime.fromisoformat(e["created_at"]) - start).total_seconds(), 2)
    return None
