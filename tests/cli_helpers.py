"""Running the real `kernelgraph` command line in a subprocess, and reading its contracts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def kernelgraph(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """`kernelgraph ...` from `cwd` (so that nothing lands in the checkout)."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    environ.pop("KERNELGRAPH_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "kernelgraph.graph.cli", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def json_line(proc: subprocess.CompletedProcess) -> dict:
    lines = proc.stdout.splitlines()
    assert lines, f"nothing on stdout; stderr:\n{proc.stderr}"
    assert len(lines) == 1, f"stdout holds more than the JSON line:\n{proc.stdout}"
    return json.loads(lines[-1])


def assert_readable_error(proc: subprocess.CompletedProcess, fragment: str) -> None:
    message = proc.stderr.strip()
    assert message.startswith("error:"), message
    assert fragment in " ".join(message.split())  # rich wraps long lines
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "\n\n" not in message  # one paragraph
