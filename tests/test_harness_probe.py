"""benchmarks/harness_probe.py: a task the builtin cannot write is still evaluated at full size
through the real harness, by a probe kernel that keeps its library calls under `hybrid`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[1] / "benchmarks" / "harness_probe.py"

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.layer = {layer}

    def forward(self, x):
        return self.layer(x)


def get_inputs():
    return [torch.randn(2, 3, 12, 12)]


def get_init_inputs():
    return [3, 8]
"""


@pytest.mark.parametrize(
    ("layer", "evaluated", "status", "says"),
    [
        ("nn.Conv2d(cin, cout, 3)", True, "passed", "hybrid policy"),
        ("nn.BatchNorm2d(cin)", False, "rejected", "BatchNorm2d"),
    ],
)
def test_probe_evaluates_library_forwards_and_names_what_the_policy_refuses(
    tmp_path, layer, evaluated, status, says
):
    task = tmp_path / "task.py"
    task.write_text(TASK.format(layer=layer))
    out = tmp_path / "probe.jsonl"
    command = [sys.executable, str(PROBE), str(task), "--device", "cpu", "--out", str(out)]
    subprocess.run(command, check=True, capture_output=True, timeout=300, cwd=tmp_path)
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["evaluated"] is evaluated and record["status"] == status
    assert says in record["message"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    command[2] = "../task.py"  # the same task, named from another folder
    subprocess.run(command, check=True, capture_output=True, timeout=300, cwd=elsewhere)
    assert len(out.read_text().splitlines()) == 1  # a task already in --out is skipped
