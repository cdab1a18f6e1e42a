"""Small KernelBench-format tasks written by the builtin tests, and the builtin's generator for
them (given the task source, as the coder node gives it: ModelNew runs the reference's
__init__, so KernelBench's protocol, which copies no weights, gives both the same parameters)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

KERNELGRAPH_PACKAGES = ("tools", "graph", "nodes", "state", "prompts")


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


MODULE_TASK = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
{body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


def module_task(folder: Path, body: str, init: str, inputs: str) -> Path:
    """A task whose forward runs `body` (statements, with a return) after `init` in __init__."""
    path = folder / "task.py"
    indent = lambda text: textwrap.indent(text, " " * 8)  # noqa: E731
    path.write_text(MODULE_TASK.format(init=indent(init), body=indent(body), inputs=inputs))
    return path


def builtin_generator(
    task: Path,
    dsl: str,
    tmp_path: Path,
    policy: str = "strict",
    device: str = "cpu",
    precision: str = "fp32",
):
    """The builtin's Generator for a task file (analysed on the CPU) for `device`, as a run's
    coder node makes it."""
    from kernelgraph.tools.analysis import analyze_task
    from kernelgraph.tools.builtin.generate import Generator
    from kernelgraph.tools.harness.cache import EvalCache
    from kernelgraph.tools.task import TaskSource

    source = TaskSource.read(task)
    # the session's cache: a task's C++ and Triton tests share its analysis (keyed by source)
    analysis = analyze_task(source, "cpu", cache=EvalCache())
    return Generator(analysis, dsl, device, policy, precision, source.effective_source)


def verify_forward(tmp_path: Path, dsl: str, forward: str, inputs: str, tweak=None) -> str:
    """Generate the builtin's kernel for `forward` (CPU: C++, or Triton under the interpreter),
    verify it with the real harness, return its source."""
    from kernelgraph.tools.harness.cache import EvalCache
    from kernelgraph.tools.harness.config import EvalConfig
    from kernelgraph.tools.harness.evaluate import evaluate

    task = task_file(tmp_path, forward, inputs)
    generator = builtin_generator(task, dsl, tmp_path)
    config = generator.default_config()
    if tweak:
        tweak(config)
    code = generator.code(config)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(code)
    settings = EvalConfig(dsl=dsl, device="cpu", seeds=1, profile=False, policy="strict")
    # a fresh verdict cache: it always evaluates (the task's reference store is the session's)
    verdict = evaluate(task, kernel, settings, cache=EvalCache(tmp_path / "cache"))
    assert verdict.passed, verdict.message
    return code


def run_isolated(
    script: Path, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """Run a Python script in an interpreter that cannot import kernelgraph: `-I` (no
    PYTHONPATH, no script or working directory on sys.path, no user site) and `-S` (no .pth
    files, so the editable install's path hook stays out), with site-packages added by hand."""
    site = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    boot = (
        f"import sys, runpy; sys.path += {site!r}; sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", boot, str(script), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
