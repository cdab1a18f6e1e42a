"""Assembling and running the kernelgraph state machine, and the CLI.

Everything the CLI does is a plain function call:

    from graph import RunConfig, run, approve
    summary = run(RunConfig(task_path="task.py", dsl="triton", device="cuda",
                            model=ModelConfig(name="gpt-4o", base_url="https://...")))
"""

from __future__ import annotations

import importlib
from typing import Any

_API = {
    "run": ("graph.runner", "start"),
    "resume": ("graph.runner", "resume"),
    "approve": ("graph.runner", "approve"),
    "reject": ("graph.runner", "reject"),
    "edit": ("graph.runner", "edit"),
    "branch": ("graph.branching", "branch"),
    "history": ("graph.inspect", "history"),
    "list_runs": ("graph.inspect", "list_runs"),
    "show": ("graph.inspect", "show"),
    "export": ("graph.inspect", "export"),
    "delete": ("graph.inspect", "delete"),
    "RunConfig": ("state.config", "RunConfig"),
    "ModelConfig": ("state.config", "ModelConfig"),
    "Limits": ("state.config", "Limits"),
    "RunSummary": ("graph.summary", "RunSummary"),
}


def __getattr__(name: str) -> Any:  # imported on first use: the CLI's start-up stays light
    if name not in _API:
        raise AttributeError(f"module 'graph' has no attribute {name!r}")
    module, attr = _API[name]
    return getattr(importlib.import_module(module), attr)


__all__ = list(_API)
