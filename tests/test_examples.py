"""The shipped examples (examples/<task>/) are correct at small CPU sizes.

For each task and each CPU-runnable kernel (Triton under its interpreter, C++), this loads the
task with shrunken size constants, seeds torch identically before building Model and ModelNew
(as the harness does, so parameters match), runs both on the same inputs and compares them at
the harness's tolerance (atol = rtol = 1e-4).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# Small sizes, as `--set NAME=VALUE` would give them; odd sizes exercise the masks and tails.
# A task may appear more than once to reach a second code path (e.g. rows too long for one block).
CASES = {
    "swish_bias_clamp": ("swish_bias_clamp", dict(BATCH=4, CHANNELS=5, HEIGHT=33, WIDTH=31)),
    "mean_over_dim1": ("mean_over_dim1", dict(BATCH=3, REDUCE=100, COLS=200)),
    "softmax": ("softmax", dict(ROWS=64, COLS=1000)),
    "softmax_long_rows": ("softmax", dict(ROWS=4, COLS=10000)),
    "layernorm": ("layernorm", dict(BATCH=2, SEQ=16, HIDDEN=1000)),
    "layernorm_long_rows": ("layernorm", dict(BATCH=1, SEQ=3, HIDDEN=9000)),
    "matmul": ("matmul", dict(M=200, N=300, K=130)),
    "linear_gelu_scale": ("linear_gelu_scale", dict(BATCH=200, IN_FEATURES=130, OUT_FEATURES=300)),
    "conv3x3_relu": (
        "conv3x3_relu",
        dict(BATCH=2, IN_CHANNELS=3, OUT_CHANNELS=20, HEIGHT=10, WIDTH=21),
    ),
}
DSLS = ("triton", "cpp")


def _import(path: Path, name: str, constants: dict | None = None):
    """Import a file as a fresh module; `constants` overrides its module-level size constants."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton reads kernel source through the module
    spec.loader.exec_module(module)
    for key, value in (constants or {}).items():
        assert hasattr(module, key), f"{path} has no constant {key}"
        setattr(module, key, value)  # get_inputs / get_init_inputs read the globals when called
    return module


def check(case: str, dsl: str) -> None:
    """Run one task's Model and ModelNew on the same inputs and compare."""
    task_name, sizes = CASES[case]
    folder = EXAMPLES / task_name
    task = _import(folder / "task.py", f"example_task_{case}", sizes)
    kernel = _import(folder / f"kernel_{dsl}.py", f"example_kernel_{case}_{dsl}")

    init_inputs = task.get_init_inputs()
    torch.manual_seed(0)
    model = task.Model(*init_inputs)
    torch.manual_seed(0)
    model_new = kernel.ModelNew(*init_inputs)
    torch.manual_seed(1)
    inputs = task.get_inputs()

    with torch.no_grad():
        expected = model(*inputs)
        actual = model_new(*inputs)

    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    max_err = (actual - expected).abs().max().item()
    assert torch.allclose(actual, expected, atol=1e-4, rtol=1e-4), f"max abs error {max_err}"


@pytest.mark.parametrize("dsl", DSLS)
@pytest.mark.parametrize("case", list(CASES))
def test_example_matches_reference(case, dsl):
    if dsl == "cpp":
        check(case, dsl)
        return
    # Triton must see TRITON_INTERPRET=1 before it is first imported (its standard library is
    # decorated at import), so the Triton check runs in a fresh interpreter: this file as a script.
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, __file__, case, dsl], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


if __name__ == "__main__":
    if sys.argv[2] == "triton":
        from kernelgraph.tools.dsl.triton import fix_interpreter_index

        fix_interpreter_index()
    check(sys.argv[1], sys.argv[2])
