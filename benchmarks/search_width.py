"""One candidate at a time against a parallel search (issue 14): for each task, `kernelgraph
run --model builtin` with the same candidate budget (`--max-iterations`) as width 1 (the
six-node graph) and as `--width W --islands K`; time to the best kernel and its speedup.

Each run gets fresh kernelgraph, Triton and Inductor caches, so neither reuses the other's
verdicts or builds. Lines already in --out are skipped: a killed call resumes where it was.

    python benchmarks/search_width.py --task kb/level1/2_Standard_matrix_multiplication_.py \
        --budget 16 --mode 1x1 --mode 8x2 --out search_width.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from _common import REPO, emit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", action="append", required=True, type=Path)
    parser.add_argument("--mode", action="append", default=None,
                        help="WIDTHxISLANDS, e.g. 1x1 (one at a time) or 8x2")  # fmt: skip
    parser.add_argument("--budget", type=int, default=16, help="--max-iterations of each run")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="per run")
    parser.add_argument("--deadline-s", type=float, default=None,
                        help="start no task's runs after this many seconds")  # fmt: skip
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    done = _done(args.out)
    started = time.monotonic()
    for task in args.task:
        if args.deadline_s is not None and time.monotonic() - started > args.deadline_s:
            break
        for mode in args.mode or ["1x1", "8x2"]:
            if (task.stem, mode) in done:
                continue
            emit(measure(task, mode, args) | {"device": _device_name()}, args.out)


def measure(task: Path, mode: str, args: argparse.Namespace) -> dict:
    width, islands = (int(part) for part in mode.split("x"))
    scratch = Path(tempfile.mkdtemp(prefix=f"kg-width-{task.stem}-{mode}-"))
    env = os.environ | {
        "KERNELGRAPH_CACHE_DIR": str(scratch / "cache"),
        "TRITON_CACHE_DIR": str(scratch / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env_path()])),
    }
    db = scratch / "runs.db"
    command = [sys.executable, "-m", "kernelgraph.graph.cli", "run", str(task), "--model",
               "builtin", "--device", args.device, "--max-iterations", str(args.budget),
               "--plateau-patience", str(args.budget), "--width", str(width), "--islands",
               str(islands), "--no-baseline-compile", "--db", str(db), "--json", "--quiet"]  # fmt: skip
    started = time.monotonic()
    record = {"task": task.stem, "mode": mode, "width": width, "islands": islands,
              "budget": args.budget}  # fmt: skip
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=args.timeout_s)  # fmt: skip
    except subprocess.TimeoutExpired:
        return record | {"error": f"the run took more than --timeout-s {args.timeout_s:g}"}
    record |= {"exit_code": proc.returncode, "wall_s": round(time.monotonic() - started, 1)}
    try:
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return record | {"error": proc.stderr[-2000:]}
    best = summary.get("best") or {}
    record |= {
        "status": summary.get("status"),
        "stop_reason": summary.get("stop_reason"),
        "best_speedup_vs_eager": best.get("speedup_vs_eager"),
        "best_sol_pct": best.get("sol_pct"),
    }
    return record | _timeline(db, summary["run_id"], best.get("candidate_id"))


def _timeline(db: Path, run_id: str, best_id: str | None) -> dict:
    """Candidates written and evaluated, and seconds from the run's start to the best
    kernel's profile (and to the first profiled kernel)."""
    with sqlite3.connect(db) as conn:
        start = _when(
            conn.execute("SELECT created_at FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        )
        written = conn.execute(
            "SELECT count(*) FROM candidates WHERE run_id = ?", (run_id,)
        ).fetchone()[0]
        rows = conn.execute(
            "SELECT e.candidate_id, e.created_at FROM evaluations e JOIN candidates c "
            "ON e.candidate_id = c.id WHERE c.run_id = ? AND e.kernel_ms IS NOT NULL "
            "ORDER BY e.created_at",
            (run_id,),
        ).fetchall()
    profiled = [(cid, (_when(at) - start).total_seconds()) for cid, at in rows]
    to_best = next((s for cid, s in profiled if cid == best_id), None)
    return {
        "candidates": written,
        "profiled": len(profiled),
        "s_to_first_profile": round(profiled[0][1], 1) if profiled else None,
        "s_to_best": round(to_best, 1) if to_best is not None else None,
    }


def _device_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001 - a label only
        return "unknown"


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text)


def env_path() -> str:
    return os.environ.get("PYTHONPATH", "")


def _done(out: Path) -> set[tuple[str, str]]:
    if not out.exists():
        return set()
    lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return {(r["task"], r["mode"]) for r in lines if "error" not in r}


if __name__ == "__main__":
    main()
