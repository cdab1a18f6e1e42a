"""What a killed `kernelgraph bench` costs to resume: run a bench, SIGKILL it while one of its
runs is under way, then `bench --resume` and time it against the runs it still had to do.

    python benchmarks/bench_resume.py --problems 6 --kill-after 3 [--device cpu] [--model builtin]
        [--set ROWS=256 --set COLS=1024] [--out FILE]

The suite is N copies of examples/softmax/task.py in a level folder (so each problem is its own
run, while the harness's caches are shared, as in a real bench). Prints one JSON line: the first
invocation's wall time up to the kill, the resume's wall time, the jobs it ran and skipped, the
sum of the wall times of the runs it ran, and the rest (`overhead_s`: reading the folder, the
store, and writing the report).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, emit


def kernelgraph(*args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kernelgraph.graph.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def results(folder: Path) -> list[dict]:
    path = folder / "results.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=6)
    parser.add_argument("--kill-after", type=int, default=3, help="Finished runs before the kill.")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="builtin")
    parser.add_argument("--max-iterations", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], help="Size constants, NAME=VALUE.")
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kg-bench-resume-"))
    level = work / "suite" / "level1"
    level.mkdir(parents=True)
    for i in range(1, ns.problems + 1):
        shutil.copy(REPO / "examples" / "softmax" / "task.py", level / f"{i}_Softmax.py")
    folder, env = work / "bench", {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["bench", str(work / "suite"), "--device", ns.device, "--model", ns.model, "--quiet"]
    args += ["--max-iterations", str(ns.max_iterations), "--out", str(folder)]
    args += ["--db", str(work / "kg.db"), *[x for s in ns.set for x in ("--set", s)]]
    start = time.monotonic()
    first = kernelgraph(*args, env=env)
    while len(results(folder)) < ns.kill_after and first.poll() is None:
        time.sleep(0.2)  # polling the bench's own results file, not waiting for work
    time.sleep(2.0)  # let the next run start and evaluate for a moment
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed_at = time.monotonic() - start
    before = {(r["problem"], r["sample"]) for r in results(folder)}
    start = time.monotonic()
    resumed = kernelgraph("bench", "--resume", str(folder), "--json", "--quiet", env=env)
    out, errs = resumed.communicate()
    wall = time.monotonic() - start
    summary = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"error": errs[-500:]}
    ran = [r for r in results(folder) if (r["problem"], r["sample"]) not in before]
    runs_s = sum(r["wall_s"] for r in ran)
    emit({
        "kind": "bench_resume", "device": ns.device, "model": ns.model, "problems": ns.problems,
        "killed_after_s": round(killed_at, 1), "finished_before_kill": len(before),
        "resume_wall_s": round(wall, 1), "ran": summary.get("ran"), "skipped": summary.get("skipped"),
        "runs_wall_s": round(runs_s, 1), "overhead_s": round(wall - runs_s, 1),
        "verified": (summary.get("summary") or {}).get("overall", {}).get("verified"),
        "resumed_run_ids_kept": all(r.get("run_id") for r in ran),
    }, ns.out)  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
