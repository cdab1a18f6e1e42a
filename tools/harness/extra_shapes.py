"""Opt-in verification at other sizes (`--extra-shapes`), reported apart from the verdict.

A kernel specialised to the declared shape is legal, so these results never change the status.
Variants shrink every integer size constant to an odd-ish value, to exercise masks and tails.
"""

from __future__ import annotations

from dataclasses import replace

from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.verdict import TaskError
from kernelgraph.tools.task import TaskSource

SHRINKS = (("half+1", lambda v: v // 2 + 1), ("third+3", lambda v: v // 3 + 3))


def variants(task: TaskSource) -> list[tuple[str, dict]]:
    ints = {
        name: value
        for name, value in task.constants.items()
        if isinstance(value, int) and not isinstance(value, bool) and value > 4
    }
    if not ints:
        return []
    found = []
    for label, shrink in SHRINKS:
        sets = {**task.sets, **{name: shrink(value) for name, value in ints.items()}}
        if sets != task.sets:
            found.append((label, sets))
    return found


def check_extra_shapes(
    task: TaskSource, kernel, config: EvalConfig, run_workers, adapter
) -> list[dict]:
    results = []
    for label, sets in variants(task):
        variant = TaskSource(task.path, task.source, sets)
        variant_config = replace(config, sets=sets, seeds=1, profile=False, extra_shapes=False)
        entry = {"variant": label, "sets": sets}
        try:
            verdict = run_workers(variant, kernel, variant_config, adapter)
            entry.update(status=verdict.status, passed=verdict.passed, message=verdict.message)
        except TaskError as exc:
            entry.update(
                status="skipped", passed=None, message=f"the task is invalid at this size: {exc}"
            )
        results.append(entry)
    return results
