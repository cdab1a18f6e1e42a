"""Each task's estimated device-memory peak, from a run on meta tensors (no memory used), for a
scheduler that lets several runs share a device. Standard library and torch only.

    python -m kernelgraph.tools.harness.sizes [--set NAME=VALUE ...] TASK...

prints one JSON object: task path -> bytes, or null where the task cannot run on meta tensors.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from kernelgraph.tools.harness.memory import peak_device_estimate
from kernelgraph.tools.harness.prepare import estimate_on_meta
from kernelgraph.tools.task import TaskSource, parse_sets

PER_TASK_S = 60  # a task that hangs on import or on meta tensors is left unknown


class _TooSlow(BaseException):  # not caught by a task's own `except Exception`
    pass


def _too_slow(signum, frame):
    raise _TooSlow


def peak_bytes(path: str, sets: dict) -> int | None:
    previous = signal.signal(signal.SIGALRM, _too_slow)
    signal.alarm(PER_TASK_S)
    try:
        module = TaskSource.read(path, sets).load_module()
        return peak_device_estimate(estimate_on_meta(module))
    except (Exception, _TooSlow):  # noqa: BLE001 - the run itself reports a broken task
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelgraph.tools.harness.sizes")
    parser.add_argument("--set", action="append", default=[], dest="sets")
    parser.add_argument("tasks", nargs="*")
    args = parser.parse_args(argv)
    sets = parse_sets(args.sets)
    json.dump({path: peak_bytes(path, sets) for path in args.tasks}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
