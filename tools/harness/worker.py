"""Entry point of every harness subprocess: `python -m tools.harness.worker ROLE SPEC.json`.

The spec and the result are JSON files in the evaluation's work directory. The worker also
enforces its own wall-clock limit, so it cannot outlive a parent that died without killing it.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import traceback
from pathlib import Path

from tools.harness.exchange import read_json, write_json
from tools.harness.verdict import TaskError

ROLES = {
    "prepare": "tools.harness.prepare",
    "candidate": "tools.harness.candidate",
    "judge": "tools.harness.judge",
    "compile": "tools.harness.compile_check",
}
SELF_LIMIT_EXIT = 124


def main(argv: list[str]) -> int:
    role, spec_path = argv[0], Path(argv[1])
    spec = read_json(spec_path) or {}
    limit = spec.get("self_limit_s")
    if limit:
        timer = threading.Timer(limit, os._exit, args=(SELF_LIMIT_EXIT,))
        timer.daemon = True
        timer.start()
    result_path = Path(spec["result"])
    try:
        result = importlib.import_module(ROLES[role]).run(spec)
    except TaskError as exc:
        result = {"task_error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    write_json(result_path, result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: extensions and CUDA contexts can hang in it


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
