"""The parent side of the task analysis: one sandboxed worker, cached. Standard library only.

The reference is the user's code, so it never runs in this process: the worker gets the task
through its stdin (like prepare) and answers with the analysis dict.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from kernelgraph.tools.analysis import ANALYSIS_VERSION
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluation import Evaluation
from kernelgraph.tools.harness.infra import retried
from kernelgraph.tools.harness.verdict import TaskError
from kernelgraph.tools.harness.workers import WorkerRun
from kernelgraph.tools.task import TaskSource

ROLE = "analyze"


def analysis_cache_key(task: TaskSource, device: str) -> str:
    """What an analysis depends on: the task (source and --set sizes), the device, this code's
    version and torch's (op names and decompositions change between torch releases)."""
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "unknown"
    material = [task.hash, device, ANALYSIS_VERSION, torch_version]
    return "analysis-" + hashlib.sha256(json.dumps(material).encode()).hexdigest()[:32]


def analyze_task(
    task: TaskSource,
    device: str,
    timeout_s: float = 120,
    cache: EvalCache | None = None,
) -> dict[str, Any]:
    """The task's analysis dict (schema: tools/analysis/__init__.py). Raises TaskError when the
    task does not import or run, runs past `timeout_s` or out of memory. A task analysed before
    (same source, sizes, device) is answered from the cache without starting a worker."""
    cache = cache or EvalCache()
    key = analysis_cache_key(task, device)
    if (hit := cache.get(key)) is not None:
        return hit
    config = EvalConfig(dsl="cpp", device=device, sets=task.sets, timeout_s=timeout_s)

    def attempt():
        ev = Evaluation(task, Path(os.devnull), config)
        try:
            return ev.worker(ROLE, {"device": device}, private=ev.base_spec())
        finally:
            ev.close()

    analysis = _analysis(retried(attempt), task, timeout_s)
    cache.put(key, analysis)
    return copy.deepcopy(analysis)


def _analysis(run: WorkerRun, task: TaskSource, timeout_s: float) -> dict[str, Any]:
    result = run.result or {}
    if "task_error" in result:
        raise TaskError(result["task_error"])
    if run.process.timed_out:
        raise TaskError(
            f"the reference in {task.path} did not finish within the time limit "
            f"({timeout_s:g} s) while kernelgraph analysed it (one forward on meta tensors): "
            f"its forward hangs or is very slow. Shrink it with --set or raise --timeout."
        )
    if run.process.rss_exceeded:
        raise TaskError(
            f"the reference in {task.path} exceeded the memory limit while kernelgraph "
            f"analysed it. Shrink it with --set."
        )
    if not result.get("ok") or not isinstance(result.get("analysis"), dict):
        detail = result.get("error") or run.process.log_tail[-1500:] or "no result"
        raise TaskError(f"the reference in {task.path} could not be analysed: {detail}")
    return result["analysis"]
