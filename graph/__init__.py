"""Assembling and running the kernelgraph state machine, and the CLI.

Everything the CLI does is a plain function call:

    from kernelgraph.graph import RunConfig, run, approve
    summary = run(RunConfig(task_path="task.py", dsl="triton", device="cuda",
                            model=ModelConfig(name="gpt-4o", base_url="https://...")))
"""

from __future__ import annotations

import importlib
from typing import Any

_API = {
    "run": ("kernelgraph.graph.runner", "start"),
    "resume": ("kernelgraph.graph.runner", "resume"),
    "approve": ("kernelgraph.graph.runner", "approve"),
    "reject": ("kernelgraph.graph.runner", "reject"),
    "edit": ("kernelgraph.graph.runner", "edit"),
    "branch": ("kernelgraph.graph.branching", "branch"),
    "history": ("kernelgraph.graph.inspect", "history"),
    "list_runs": ("kernelgraph.graph.inspect", "list_runs"),
    "show": ("kernelgraph.graph.inspect", "show"),
    "export": ("kernelgraph.graph.inspect", "export"),
    "delete": ("kernelgraph.graph.inspect", "delete"),
    "RunConfig": ("kernelgraph.state.config", "RunConfig"),
    "ModelConfig": ("kernelgraph.state.config", "ModelConfig"),
    "Limits": ("kernelgraph.state.config", "Limits"),
    "RunSummary": ("kernelgraph.graph.summary", "RunSummary"),
}


def __getattr__(name: str) -> Any:  # imported on first use: the CLI's start-up stays light
    if name not in _API:
        raise AttributeError(f"module 'graph' has no attribute {name!r}")
    module, attr = _API[name]
    return getattr(importlib.import_module(module), attr)


__all__ = list(_API)
