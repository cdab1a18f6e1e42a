"""Passing messages between harness processes. Standard library and torch only.

Specs and results are JSON files, private parts of a spec travel through the worker's stdin,
and tensors are tensor files (tools/harness/tensorfile.py) in the evaluation's work directory,
which lives in /dev/shm (shared memory) where there is room.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import torch


def work_root() -> Path:
    """Where evaluation work directories go: shared memory if it has room, else the temp dir."""
    override = os.environ.get("KERNELGRAPH_WORK_DIR")
    if override:
        return Path(override)
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        stats = os.statvfs(shm)
        if stats.f_bavail * stats.f_frsize > 8 << 30:
            return shm
    return Path(tempfile.gettempdir())


def to_device(values: Any, device: str, dtype: str | None = None) -> Any:
    """Move tensors to the device; cast floating tensors when a precision asks for it."""
    if isinstance(values, torch.Tensor):
        tensor = values.to(device)
        if dtype and tensor.is_floating_point():
            tensor = tensor.to(getattr(torch, dtype))
        return tensor
    if isinstance(values, list | tuple):
        return type(values)(to_device(v, device, dtype) for v in values)
    return values


def as_output_list(output: Any) -> list[Any]:
    return list(output) if isinstance(output, list | tuple) else [output]


def read_message() -> dict:
    """One JSON line from stdin, where only the parent can write; {} at end of input."""
    line = sys.stdin.buffer.readline()
    return json.loads(line) if line.strip() else {}


def write_json(path: Path, data: dict) -> None:
    """Atomically: a reader sees the old file or the new one. The temporary name is the
    writer's own (process and thread), so two writers of one key (two runs analysing the same
    task) cannot rename each other's file away."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
    try:
        tmp.write_text(json.dumps(data, default=repr))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
