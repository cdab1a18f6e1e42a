"""Small KernelBench-format tasks written by the builtin tests."""

from __future__ import annotations

import textwrap
from pathlib import Path


def task_file(folder: Path, forward: str, inputs: str, init: str = "", params: str = "") -> Path:
    """A task whose forward returns `forward` (an expression of x, y, self...)."""
    source = f"""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                {params or "pass"}

            def forward(self, x, y=None):
                return {forward}


        def get_inputs():
            return [{inputs}]


        def get_init_inputs():
            return [{init}]
    """
    path = folder / "task.py"
    path.write_text(textwrap.dedent(source))
    return path
