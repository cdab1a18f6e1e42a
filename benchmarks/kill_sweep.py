"""Kill a run early, many times: does every killed `kernelgraph run` exit and resume?

Each trial starts a scripted run (tests/cases: scale_add with two C++ candidates, on the CPU),
sends its process group SIGTERM DELAY seconds after the run id appears on stderr, times how
long the process takes to exit, then `kernelgraph resume`s it. One JSON line per trial:
the delay, the exit code and seconds to exit after the signal (a process still there after
`--hang-s` is SIGABRTed, with PYTHONFAULTHANDLER's thread stacks kept in the line), and the
resumed run's status. Early kills land in the graph's start-up, where a hang was found.

    python benchmarks/kill_sweep.py --delays 0.005,0.01,0.015,0.02 --repeat 10 [--out FILE]
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

CASES = REPO / "tests" / "cases"
SCRIPT = {
    "planner": [{"json": {"summary": "y = 2x + 1", "bound": "memory", "kernels": ["scale_add"]}}],
    "sketch_writer": [{"json": {"stages": [{"name": "scale_add", "description": "y = 2x + 1"}],
                                "parallel_axes": ["elements"], "tiling": []}}],
    "coder": [{"file": str(CASES / "kernels" / f"{name}.py")}
              for name in ("cpp_scale_sub", "cpp_scale_add")],
}  # fmt: skip


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "kernelgraph.graph.cli", *args]


def trial(folder: Path, seed_db: Path, delay: float, hang_s: float, env: dict) -> dict:
    db = folder / f"trial-{time.monotonic_ns()}.db"
    shutil.copy(seed_db, db)  # the reference and harness caches are warm, as in a long tune
    run = _run_args(folder, db)
    proc = subprocess.Popen(run, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    run_id = next((line.split()[1].rstrip(":") for line in proc.stderr if line.startswith("run r-")),
                  None)  # fmt: skip
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGTERM)
    killed = time.monotonic()
    row: dict = {"delay_s": delay, "run_id": run_id}
    try:
        out, _ = proc.communicate(timeout=hang_s)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGABRT)
        out, err = proc.communicate(timeout=30)
        row["hang_stacks"] = err[-4000:]
    row |= {"exit_code": proc.returncode, "exit_s": round(time.monotonic() - killed, 2),
            "summary_printed": '"run_id"' in out}  # fmt: skip
    resumed = subprocess.run(_cli("resume", str(run_id), "--json", "--quiet", "--db", str(db)),
                             env=env, capture_output=True, text=True)  # fmt: skip
    lines = [line for line in resumed.stdout.splitlines() if line.startswith("{")]
    row["resumed_status"] = json.loads(lines[-1]).get("status") if lines else None
    return row


def _run_args(folder: Path, db: Path) -> list[str]:
    return _cli("run", str(CASES / "tasks" / "scale_add.py"), "--dsl", "cpp", "--device", "cpu",
                "--max-iterations", "2", "--seeds", "1", "--model",
                f"script:{folder / 'script.json'}", "--json", "--quiet", "--db", str(db))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", default="0.005,0.01,0.015,0.02")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--hang-s", type=float, default=30.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kill_sweep_") as tmp:
        folder = Path(tmp)
        (folder / "script.json").write_text(json.dumps(SCRIPT))
        env = {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONPATH": str(REPO),
               "KERNELGRAPH_WORK_DIR": str(folder / "work")}  # fmt: skip
        (folder / "work").mkdir()
        seed_db = folder / "seed.db"
        subprocess.run(_run_args(folder, seed_db), env=env, capture_output=True, check=True)
        delays = [float(d) for d in args.delays.split(",")]
        for _ in range(args.repeat):
            for delay in delays:
                emit(trial(folder, seed_db, delay, args.hang_s, env), args.out)


if __name__ == "__main__":
    main()
