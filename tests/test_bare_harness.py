"""The harness runs on a bare GPU box: `python -m kernelgraph.tools.harness` from a checkout's
root, with no install and only the standard library, torch and the DSL. Here every package the
rest of kernelgraph needs is made unimportable (in the harness and in each worker it starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ROOT

BLOCKED = ("pydantic", "langgraph", "langchain_core", "langchain_openai", "sqlalchemy", "typer",
           "rich", "jinja2", "matplotlib", "ray")  # fmt: skip
BLOCKER = f"""
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} is not on a bare GPU box")
        return None

sys.meta_path.insert(0, Blocked())
"""


@pytest.mark.slow
def test_the_harness_runs_with_the_standard_library_and_torch_only(cases, tmp_path: Path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCKER)
    request = tmp_path / "request.json"
    config = {"dsl": "cpp", "device": "cpu", "seeds": 1, "profile": False}
    request.write_text(json.dumps({
        "task": str(cases / "tasks" / "scale_add.py"),
        "kernel": str(cases / "kernels" / "cpp_scale_add.py"), "config": config,
    }))  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    proc = subprocess.run([sys.executable, "-m", "kernelgraph.tools.harness", str(request)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    verdict = json.loads(proc.stdout.splitlines()[-1])
    assert verdict["status"] == "passed", verdict["message"]
    blocked = subprocess.run([sys.executable, "-c", "import pydantic"], env=env,
                             capture_output=True, text=True)  # fmt: skip
    assert blocked.returncode != 0  # the blocker works, so the pass above means something
