"""Scripted agent runs through the real command line: scripts, runs and store queries."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from cli_helpers import json_line, kernelgraph

CASES = Path(__file__).resolve().parent / "cases"
TASK = CASES / "tasks" / "scale_add.py"
PLAN = {"summary": "y = 2x + 1, one pass", "bound": "memory", "kernels": ["scale_add"]}
SKETCH = {
    "stages": [{"name": "scale_add", "description": "y = 2x + 1 elementwise"}],
    "parallel_axes": ["elements"],
    "tiling": [{"name": "BLOCK", "values": [1024, 4096], "default": 1024}],
}


def kernel(name: str) -> dict:
    """A scripted coder reply holding a test kernel file."""
    return {"file": str(CASES / "kernels" / f"{name}.py")}


def write_script(folder: Path, coder: list, sketches: int = 1, name="script.json") -> Path:
    path = folder / name
    script = {"planner": [{"json": PLAN}], "sketch_writer": [{"json": SKETCH}] * sketches}
    path.write_text(json.dumps(script | {"coder": coder}))
    return path


class Agent:
    """`kernelgraph` commands in one folder, with one run store."""

    def __init__(self, folder: Path, env: dict | None = None) -> None:
        self.folder = folder
        self.db = folder / "runs.db"
        self.env = {"KERNELGRAPH_DB": str(self.db), **(env or {})}

    def __call__(self, *args: str, env: dict | None = None):
        return kernelgraph(*args, cwd=self.folder, env=self.env | (env or {}))

    def run(self, script: Path, *extra: str, task: Path = TASK):
        args = ["run", str(task), "--dsl", "cpp", "--device", "cpu", "--seeds", "1"]
        # CPU speed-of-light figures swing with load: no near-SOL stop unless a test asks
        args += ["--sol-target-pct", "1e9"]
        return self(*args, "--model", f"script:{script}", "--json", *extra)

    def query(self, sql: str, *params) -> list[tuple]:
        with sqlite3.connect(self.db) as conn:
            return conn.execute(sql, params).fetchall()

    def statuses(self, run_id: str) -> list[str]:
        """Evaluation statuses of the run's candidates, oldest first."""
        return [
            row[0]
            for row in self.query(
                "SELECT e.status FROM evaluations e JOIN candidates c ON e.candidate_id = c.id "
                "WHERE c.run_id = ? ORDER BY e.created_at, e.id",
                run_id,
            )
        ]

    def llm_calls(self, run_id: str) -> dict[str, int]:
        rows = self.query(
            "SELECT node, count(*) FROM llm_calls WHERE run_id = ? GROUP BY node", run_id
        )
        return dict(rows)


def summary_of(proc) -> dict:
    """The run summary a command printed with --json."""
    data = json_line(proc)
    assert set(data) >= {"run_id", "status", "stop_reason", "best", "spend"}, data
    return data
