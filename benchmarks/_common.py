"""Shared by the benchmark scripts: which example kernels to run, and JSON-lines output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# (example, kernel file) pairs with Triton kernels, at the tasks' default (GPU) sizes.
TRITON_EXAMPLES = [
    ("swish_bias_clamp", "kernel_triton.py"),
    ("softmax", "kernel_triton.py"),
    ("layernorm", "kernel_triton.py"),
    ("matmul", "kernel_triton.py"),
]


def example(name: str, kernel: str) -> tuple[Path, Path]:
    return REPO / "examples" / name / "task.py", REPO / "examples" / name / kernel


def emit(record: dict, out: Path | None) -> None:
    line = json.dumps(record, default=repr)
    print(line, flush=True)
    if out is not None:
        with out.open("a") as f:
            f.write(line + "\n")
