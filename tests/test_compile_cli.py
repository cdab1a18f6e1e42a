"""`kernelgraph compile`: compiling for an explicit GPU target on a machine without that GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOFTMAX = REPO / "examples" / "softmax"
SMALL = ["--set", "ROWS=16", "--set", "COLS=256"]


def compile_json(kernel: Path, dsl: str, target: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "kernelgraph.graph.cli", "compile", str(SOFTMAX / "task.py"), str(kernel),
         "--dsl", dsl, "--target", target, "--json", *SMALL],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_triton_kernel_compiles_to_a_cubin_for_the_target(target):
    code, report = compile_json(SOFTMAX / "kernel_triton.py", "triton", target)
    assert code == 0 and report["ok"], report
    assert report["target"] == target
    assert report["artifacts"]["cubin"] > 0 and report["artifacts"]["ptx"] > 0


def test_a_kernel_that_does_not_type_check_fails_with_the_compilers_message(tmp_path):
    broken = tmp_path / "broken.py"
    source = (SOFTMAX / "kernel_triton.py").read_text()
    broken.write_text(source.replace("tl.exp(x)", "tl.exp(x_ptr)", 1))
    code, report = compile_json(broken, "triton", "sm_90a")
    assert code == 1 and not report["ok"]
    assert "x_ptr" in report["message"]
