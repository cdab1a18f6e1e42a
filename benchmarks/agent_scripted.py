"""Scripted agent runs end to end: `kernelgraph run` with a script model on shipped examples.

Shows where the graph's time goes around the harness (planner analysis, compile, verify,
profile) and the run summaries, on whatever device is present. One JSON line per run:

    python benchmarks/agent_scripted.py [--device cuda] [--out results.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, emit

# (example, dsl, script, --set for the CPU sizes); GPU runs use the tasks' default sizes.
RUNS = {
    "cuda": [
        ("softmax", "triton", "softmax_triton.json", []),
        ("matmul", "cuda", "matmul_cuda.json", []),
    ],
    "cpu": [("softmax", "cpp", "softmax_cpp.json", ["ROWS=512", "COLS=1024"])],
}


def run_one(example: str, dsl: str, script: str, sets: list[str], device: str, db: Path) -> dict:
    args = [
        sys.executable,
        "-m",
        "kernelgraph.graph.cli",
        "run",
        str(REPO / "examples" / example / "task.py"),
    ]
    args += ["--dsl", dsl, "--device", device, "--max-iterations", "2", "--json", "--quiet"]
    args += ["--model", f"script:{REPO / 'examples' / 'scripts' / script}"]
    for item in sets:
        args += ["--set", item]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "KERNELGRAPH_DB": str(db), "PYTHONPATH": path}
    start = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.monotonic() - start
    lines = proc.stdout.strip().splitlines()
    summary = json.loads(lines[-1]) if lines else {"error": proc.stderr[-2000:]}
    history = subprocess.run(
        [sys.executable, "-m", "kernelgraph.graph.cli", "history", summary.get("run_id", "-"), "--json"],
        capture_output=True, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    steps = json.loads(history.stdout.splitlines()[-1]) if history.returncode == 0 else []
    return {
        "example": example,
        "dsl": dsl,
        "device": device,
        "exit_code": proc.returncode,
        "wall_s": round(wall, 1),
        "nodes": [s["node"] for s in steps],
        **summary,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", type=Path, default=None)
    ns = parser.parse_args()
    import torch

    device = ns.device or ("cuda" if torch.cuda.is_available() else "cpu")
    db = Path(tempfile.mkdtemp(prefix="kg-agent-bench-")) / "runs.db"
    for example, dsl, script, sets in RUNS[device]:
        emit(run_one(example, dsl, script, sets, device, db), ns.out)


if __name__ == "__main__":
    main()
