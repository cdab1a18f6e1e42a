"""The builtin model over a suite of KernelBench-format tasks: pass rate and speedups.

Runs `kernelgraph run TASK --model builtin --json` once per task (policy `hybrid` for
`fused_conv_*` tasks, `strict` otherwise) and appends one JSON line per task to --out as it
goes, after a first line with the device's measured copy bandwidth:

    python benchmarks/builtin_bench.py --out runs/builtin.jsonl          # whole suite on cuda
    python benchmarks/builtin_bench.py --out runs/builtin.jsonl --only 'softmax_*'
    python benchmarks/builtin_bench.py --report runs/builtin.jsonl      # markdown report

To resume (e.g. after a 10-minute command limit), run the same command again: tasks already
in --out are skipped, and no new task starts after --deadline-s seconds. The run store
defaults to runs.db next to --out, so resumed invocations share it (`kernelgraph show RUN
--db ...` opens any run). On the device box, whose $OUT is emptied before each command, keep
--out in a folder that persists between commands (e.g. /tmp/kg/builtin.jsonl) and copy it to
$OUT at the end of each. `--bandwidth` only measures and records the bandwidth. `--set` goes
to every task (use it with --only). A suite is `DIR/*.py` and `DIR/*/task.py`, so that
`--suite examples` works too; `--suite` may be given several times (KernelBench's level1 and
level2 folders: names become `level1/23_Softmax`).

For KernelBench at its real sizes (issue 11's measure), each record also lists every evaluation
of the run (its wall time, peak host and device memory, whether the task's reference came from
the reference store) and whether the harness evaluated the problem at all; `--fallback-policy
hybrid` runs again under that policy a problem the builtin cannot write under `strict`, or
whose strict convolution kernels all missed a reference that cuDNN computed in TF32, and
`--pairs FILE` lists each verified kernel with its problem for benchmarks/kernelbench_agreement.py.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import REPO, emit

TIMING_KEYS = {"kernel_ms": "kernel_ms", "eager_ms": "eager_ms", "compile_ms": "torch_compile_ms"}


def discover(suites: list[Path], only: str | None) -> list[tuple[str, Path]]:
    """(name, path) of every task: `DIR/NAME.py` and `DIR/NAME/task.py`, sorted by name; with
    several suites a name is `SUITE/NAME`."""
    found = []
    for suite in suites:
        prefix = f"{suite.name}/" if len(suites) > 1 else ""
        found += [(prefix + p.stem, p) for p in suite.glob("*.py") if not p.name.startswith("_")]
        found += [(prefix + p.parent.name, p) for p in suite.glob("*/task.py")]
    globs = only.split(",") if only else ["*"]
    return sorted((n, p) for n, p in found if any(fnmatch.fnmatch(n, g) for g in globs))


def interleave(tasks: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Round-robin over categories, so that a partial run still covers every category."""
    by_category: dict[str, list[tuple[str, Path]]] = {}
    for item in tasks:
        by_category.setdefault(category(item[0]), []).append(item)
    columns = list(by_category.values())
    return [
        col[i] for i in range(max(map(len, columns), default=0)) for col in columns if i < len(col)
    ]


def category(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else name.split("_", 1)[0]


def policy_for(name: str) -> str:
    return "hybrid" if fnmatch.fnmatch(name, "fused_conv_*") else "strict"


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [json.loads(line) for line in lines if line.startswith("{")]


def measure_bandwidth(device: str, repeats: int = 20) -> dict[str, Any]:
    """Achievable memory bandwidth: median time of a large `y.copy_(x)`, read + write bytes."""
    import torch

    nbytes = 2**30 if device.startswith("cuda") else 2**28
    x = torch.randn(nbytes // 4, device=device)
    y = torch.empty_like(x)
    times_ms = []
    for i in range(repeats + 3):  # three warm-up copies
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            y.copy_(x)
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            y.copy_(x)
            elapsed = (time.perf_counter() - t0) * 1e3
        if i >= 3:
            times_ms.append(elapsed)
    median = statistics.median(times_ms)
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
    del x, y
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {
        "kind": "bandwidth",
        "device": device,
        "device_name": name,
        "bytes": nbytes,
        "median_ms": round(median, 4),
        "gb_per_s": round(2 * nbytes / (median * 1e-3) / 1e9, 1),
    }


def cli(args: list[str], timeout: float | None = None) -> tuple[int, str, str]:
    """`python -m kernelgraph.graph.cli ARGS` in its own process group, stopped with the group on timeout."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelgraph.graph.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": path}, start_new_session=True,
    )  # fmt: skip
    try:
        out, errs = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the run marks itself interrupted, stops its harness
        try:
            out, errs = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, errs = proc.communicate()
        return 124, out, errs + f"\nkilled after {timeout:.0f} s"
    return proc.returncode, out, errs


def last_json(text: str) -> dict[str, Any] | None:
    lines = text.strip().splitlines()
    try:
        return json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None


def run_task(name: str, path: Path, ns: argparse.Namespace, db: Path) -> dict[str, Any]:
    record = run_once(name, path, ns, db, policy_for(name))
    unsupported = record.get("stop_reason") == "builtin_unsupported"
    # every strict convolution missed a reference cuDNN computed in TF32 (the run says so)
    tf32_miss = "--policy hybrid" in (record.get("message") or "")
    if (unsupported or tf32_miss) and ns.fallback_policy and ns.fallback_policy != record["policy"]:
        first = {k: record.get(k) for k in ("policy", "status", "stop_reason", "message")}
        record = run_once(name, path, ns, db, ns.fallback_policy)
        record["first_try"] = first
    record["harness"] = harness_summary(record.get("evaluations") or [], record)
    return record


def run_once(name: str, path: Path, ns: argparse.Namespace, db: Path, policy: str) -> dict:
    args = ["run", str(path.resolve()), "--dsl", ns.dsl, "--device", ns.device]
    args += ["--model", ns.model, "--policy", policy, "--json", "--quiet", "--db", str(db)]
    args += ["--max-iterations", str(ns.max_configs)]
    args += ["--timeout", str(ns.timeout)] if ns.timeout else []
    args += [] if ns.baseline_compile else ["--no-baseline-compile"]
    args += ["--no-cache"] if ns.no_cache else []
    for item in ns.set or []:
        args += ["--set", item]
    start = time.monotonic()
    code, out, errs = cli(args, ns.task_timeout)
    record: dict[str, Any] = {
        "kind": "task", "task": name, "category": category(name), "policy": policy,
        "dsl": ns.dsl, "device": ns.device, "exit_code": code, "path": str(path),
        "wall_s": round(time.monotonic() - start, 1),
    }  # fmt: skip
    summary = last_json(out) or {}
    best = summary.get("best") or {}
    record.update(
        run_id=summary.get("run_id"),
        status="timeout" if code == 124 else summary.get("status", "error"),
        stop_reason=summary.get("stop_reason"),
        speedup_vs_eager=best.get("speedup_vs_eager"),
        speedup_vs_compile=best.get("speedup_vs_compile"),
        sol_pct=best.get("sol_pct"),
        best_path=best.get("path"),
    )
    shown = None
    if record["run_id"]:
        show_code, show_out, _ = cli(["show", record["run_id"], "--json", "--db", str(db)], 120)
        shown = last_json(show_out) if show_code == 0 else None
        record["evaluations"] = evaluations(db, record["run_id"])
    verdict = (shown or {}).get("verdict") or {}
    timing = verdict.get("timing") or {}
    passed = verdict.get("status") == "passed"
    record["verdict"] = verdict.get("status")
    record.update({k: timing.get(v) if passed else None for k, v in TIMING_KEYS.items()})
    record["candidates"] = len((shown or {}).get("candidates") or [])
    if record["status"] != "verified":
        text = summary.get("message") or verdict.get("message") or errs.strip()[-1500:]
        record["message"] = text
    return record


def evaluations(db: Path, run_id: str) -> list[dict[str, Any]]:
    """Per evaluation of the run: status, wall time, peak memory, reference store use."""
    from kernelgraph.state.store import open_store

    rows = []
    with open_store(db) as store:
        for row in store.evaluations_for_run(run_id):
            verdict = row.get("verdict") or {}
            phases = verdict.get("phases_s") or {}
            memory = verdict.get("memory") or {}
            rows.append(
                {
                    "status": verdict.get("status"),
                    "cached_verdict": bool(verdict.get("cached")),
                    "reference": verdict.get("reference") or {},
                    "wall_s": round(sum(phases.get(k, 0.0) for k in WORKERS), 2),
                    "phases_s": phases,
                    "peak_host_gib": gib(
                        max((memory.get("peak_host_bytes") or {}).values(), default=None)
                    ),  # fmt: skip
                    "peak_device_gib": gib(
                        max(
                            (v for v in (memory.get("peak_device_bytes") or {}).values() if v),
                            default=None,
                        )
                    ),  # fmt: skip
                }
            )
    return rows


WORKERS = ("prepare", "candidate", "judge")


def gib(value: float | None) -> float | None:
    return None if value is None else round(value / 2**30, 2)


def harness_summary(evals: list[dict[str, Any]], record: dict[str, Any]) -> dict[str, Any]:
    """Did the harness evaluate this problem, and if not, why (the builtin, or the harness)."""
    ran = [e for e in evals if not e["cached_verdict"]]
    reason = None
    if not ran:
        reason = record.get("stop_reason") or record.get("status")
    return {
        "evaluated": bool(ran),
        "reason": reason,
        "harness_failure": record.get("stop_reason") in ("harness_error", "task_error")
        or record.get("status") == "timeout",
        "candidate_wall_s": [e["wall_s"] for e in ran],
        "peak_host_gib": max((e["peak_host_gib"] or 0 for e in ran), default=None),
        "peak_device_gib": max((e["peak_device_gib"] or 0 for e in ran), default=None),
    }


def run_suite(ns: argparse.Namespace) -> None:
    start = time.monotonic()
    out: Path = ns.out
    out.parent.mkdir(parents=True, exist_ok=True)
    db: Path = ns.db or out.parent / "runs.db"
    records = read_records(out)
    measured = any(r.get("kind") == "bandwidth" and r.get("device") == ns.device for r in records)
    if ns.bandwidth or not measured:
        emit(measure_bandwidth(ns.device), out)
    if ns.bandwidth:
        return
    done = {r["task"] for r in records if r.get("kind") == "task"}
    tasks = discover(ns.suite, ns.only)
    todo = interleave([(n, p) for n, p in tasks if n not in done])
    print(f"{len(tasks)} tasks, {len(tasks) - len(todo)} already in {out}", file=sys.stderr)
    lock = threading.Lock()

    def one(name: str, path: Path) -> None:
        if time.monotonic() - start > ns.deadline_s:
            return  # past the deadline: left for the next invocation
        record = run_task(name, path, ns, db)
        with lock:
            emit(record, out)
            if ns.pairs and has_verified_kernel(record) and record.get("best_path"):
                pair = {"problem": record["path"], "kernel": record["best_path"], "ours": True}
                with ns.pairs.open("a") as f:
                    f.write(json.dumps({"task": name, "dsl": ns.dsl, **pair}) + "\n")

    # Tasks overlap their CPU-side work; profiling still takes the device's exclusive timing
    # slot (tools/device_slot.py), so timings are not disturbed by the other jobs.
    with ThreadPoolExecutor(max_workers=max(1, ns.jobs)) as pool:
        list(pool.map(lambda item: one(*item), todo))
    left = len(todo) - len({r["task"] for r in read_records(out) if r.get("kind") == "task"} - done)
    if left:
        print(f"deadline: {left} tasks left; run again to go on", file=sys.stderr)


def has_verified_kernel(record: dict[str, Any]) -> bool:
    """A verified best kernel, also when the task's time cap stopped the run while it tuned."""
    return record.get("status") == "verified" or record.get("verdict") == "passed"


def geomean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, kept)) / len(kept)) if kept else None


def fmt(value: Any, spec: str = ".2f") -> str:
    if value is None:
        return "-"
    return format(value, spec) if isinstance(value, float) else str(value)


def table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def report(path: Path) -> None:
    """Markdown on stdout: bandwidth, a row per task, pass rate, geomean speedups per category."""
    records = read_records(path)
    tasks = {r["task"]: r for r in records if r.get("kind") == "task"}  # the last one counts
    rows = sorted(tasks.values(), key=lambda r: r["task"])
    print(f"# builtin model benchmark: {path.name}\n")
    for bw in (r for r in records if r.get("kind") == "bandwidth"):
        print(
            f"Copy bandwidth on {bw['device']} ({bw['device_name']}): {bw['gb_per_s']} GB/s "
            f"({bw['bytes'] / 2**20:.0f} MiB copy, median of 20: {bw['median_ms']} ms)\n"
        )
    cols = ["task", "policy", "status", "stop_reason", "candidates", "kernel_ms", "eager_ms"]
    cols += ["compile_ms", "speedup_vs_eager", "speedup_vs_compile", "sol_pct", "wall_s"]
    spec = {c: ".4g" if c.endswith("_ms") else ".2f" for c in cols}
    table(cols, [[fmt(r.get(c), spec[c]) for c in cols] for r in rows])
    verified = [r for r in rows if has_verified_kernel(r)]
    rate = f" ({100 * len(verified) / len(rows):.0f}%)" if rows else ""
    print(f"\nPass rate over all tasks: {len(verified)}/{len(rows)}{rate}\n")
    per_category = []
    for cat in sorted({r["category"] for r in rows}):
        in_cat = [r for r in rows if r["category"] == cat]
        ok = [r for r in in_cat if has_verified_kernel(r)]
        fast = sum((r.get("speedup_vs_eager") or 0) > 1 for r in ok)
        eager = geomean([r.get("speedup_vs_eager") for r in ok])
        compiled = geomean([r.get("speedup_vs_compile") for r in ok])
        per_category.append([cat, f"{len(ok)}/{len(in_cat)}", str(fast), fmt(eager), fmt(compiled)])
    header = ["category", "verified", "faster than eager", "geomean vs eager"]
    table([*header, "geomean vs torch.compile"], per_category)
    overall = geomean([r.get("speedup_vs_eager") for r in verified])
    print(f"\nOverall geomean speedup vs eager (verified tasks): {fmt(overall)}")
    harness_table([r for r in rows if r.get("harness")])
    failed = [r for r in rows if not has_verified_kernel(r)]
    if failed:
        print("\n## Not verified\n")
        for r in failed:
            first = (r.get("message") or "").strip().splitlines()[:1] or [""]
            print(
                f"- `{r['task']}` ({r.get('status')}, exit {r.get('exit_code')}): {first[0][:300]}"
            )


def harness_table(rows: list[dict[str, Any]]) -> None:
    """Issue 11's view: did the harness evaluate each problem, at what cost per evaluation."""
    if not rows:
        return
    print("\n## Harness at the problems' sizes\n")
    header = ["task", "evaluated", "harness failure", "reference build s", "wall s per evaluation"]
    body = []
    for r in rows:
        h = r["harness"]
        builds = {e["reference"].get("build_s") for e in r.get("evaluations") or []} - {None}
        walls = ", ".join(f"{w:.1f}" for w in h["candidate_wall_s"]) or "-"
        body.append([r["task"], "yes" if h["evaluated"] else f"no ({h['reason']})",
                     "yes" if h["harness_failure"] else "no",
                     ", ".join(f"{b:.1f}" for b in sorted(builds)) or "-", walls])  # fmt: skip
    table([*header, "peak host GiB", "peak device GiB"],
          [[*row, fmt(r["harness"]["peak_host_gib"]), fmt(r["harness"]["peak_device_gib"])]
           for row, r in zip(body, rows, strict=True)])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, action="append", help="Folder of tasks; repeatable.")
    parser.add_argument(
        "--fallback-policy",
        help="Policy for a second try of unsupported tasks (and of convolutions that missed a TF32 reference).",
    )
    parser.add_argument("--pairs", type=Path, help="Append verified (problem, kernel) pairs here.")
    parser.add_argument(
        "--no-cache", action="store_true", help="Runs read no cached verdict or reference."
    )
    parser.add_argument(
        "--baseline-compile", action=argparse.BooleanOptionalAction, default=True,
        help="Also time torch.compile (default on).",
    )  # fmt: skip
    parser.add_argument(
        "--only", help="Globs over task names, comma-separated: 'softmax_*,norm_*'."
    )
    parser.add_argument("--out", type=Path, help="JSON-lines file, appended to.")
    parser.add_argument("--report", type=Path, help="Print the markdown report of this file.")
    parser.add_argument("--bandwidth", action="store_true", help="Only measure bandwidth.")
    parser.add_argument("--device", help="cpu or cuda (default: cuda if present).")
    parser.add_argument("--dsl", help="Default: triton on cuda, cpp on cpu.")
    parser.add_argument("--model", default="builtin")
    parser.add_argument("--max-configs", type=int, default=6, help="--max-iterations per task.")
    parser.add_argument("--set", action="append", help="NAME=VALUE, passed to every run.")
    parser.add_argument("--db", type=Path, help="Run store (default: runs.db next to --out).")
    parser.add_argument("--timeout", type=float, help="run's --timeout per harness process, s.")
    parser.add_argument("--task-timeout", type=float, default=900.0, help="Per task wall, s.")
    parser.add_argument("--deadline-s", type=float, default=540.0)
    parser.add_argument("--jobs", type=int, default=1, help="Tasks run at once (default 1).")
    ns = parser.parse_args()
    if ns.report:
        report(ns.report)
        return
    if ns.out is None:
        parser.error("--out FILE is required (or --report FILE)")
    ns.suite = ns.suite or [REPO / "benchmarks" / "builtin_suite"]
    if ns.device is None:
        import torch

        ns.device = "cuda" if torch.cuda.is_available() else "cpu"
    ns.dsl = ns.dsl or ("cpp" if ns.device == "cpu" else "triton")
    run_suite(ns)


if __name__ == "__main__":
    main()
