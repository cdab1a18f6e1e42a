"""Entry point of every harness subprocess: `python -m kernelgraph.tools.harness.worker ROLE SPEC.json`.

The spec and the result are JSON files in the evaluation's work directory. The worker also
enforces its own wall-clock limit, so it cannot outlive a parent that died without killing it.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from kernelgraph.tools.harness.exchange import read_json, write_json
from kernelgraph.tools.harness.memory import DeviceBusy
from kernelgraph.tools.harness.stopwatch import watch
from kernelgraph.tools.harness.verdict import TaskError

ROLES = {
    "prepare": "kernelgraph.tools.harness.prepare",
    "candidate": "kernelgraph.tools.harness.candidate",
    "judge": "kernelgraph.tools.harness.judge",
    "compile": "kernelgraph.tools.harness.compile_check",
    "analyze": "kernelgraph.tools.analysis.worker",
}
SELF_LIMIT_EXIT = 124


def main(argv: list[str]) -> int:
    role, spec_path = argv[0], Path(argv[1])
    spec = read_json(spec_path) or {}
    startup_s = time.time() - spec.get("spawned_at", time.time())  # Python + torch import
    limit = spec.get("self_limit_s")
    if limit:
        timer = threading.Timer(limit, os._exit, args=(SELF_LIMIT_EXIT,))
        timer.daemon = True
        timer.start()
    result_path = Path(spec["result"])
    try:
        with watch.stage("import_role"):
            role_module = importlib.import_module(ROLES[role])
        result = role_module.run(spec)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        result = failure_result(exc)
    result["stages_s"] = {"startup": round(startup_s, 4), **watch.seconds}
    write_json(result_path, result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: extensions and CUDA contexts can hang in it


def failure_result(exc: Exception) -> dict:
    """What the parent learns of a role that raised: the task's fault, the machine's (retried,
    then a harness error), or an error of the role's own."""
    if isinstance(exc, TaskError):
        return {"task_error": str(exc)}
    if isinstance(exc, DeviceBusy):
        return {"machine_error": str(exc), "disk_bytes": exc.disk_bytes}
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        # other jobs on the machine filled the disk after the preflight check said it fits
        return {"machine_error": f"the disk filled up ({exc}); other jobs may be writing to it: "
                                 f"free some disk or run fewer at once"}  # fmt: skip
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
