"""The candidate's guards record ops and poison memory without importing torch._dynamo (seconds
of CPU in every candidate process), and still do their work."""

from __future__ import annotations

import json
import subprocess
import sys

from cli_helpers import ROOT

GUARDED_FORWARD = """
import json, sys, torch
from kernelgraph.tools.dsl.base import LaunchCounter
from kernelgraph.tools.harness.guards import OpRecorder, poison_uninitialized_memory

poison_uninitialized_memory()
unwritten = torch.empty(4)
with OpRecorder(LaunchCounter()) as recorder:
    torch.relu(torch.ones(3) - 2)
poison_uninitialized_memory(False)
print(json.dumps({
    "dynamo": "torch._dynamo" in sys.modules,
    "ops": sorted(recorder.ops),
    "poisoned": bool(unwritten.isnan().all()),
    "deterministic_after": torch.are_deterministic_algorithms_enabled(),
}))
"""


def test_guards_record_and_poison_without_importing_dynamo() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", GUARDED_FORWARD],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {
        "dynamo": False,
        "ops": ["aten.ones.default", "aten.relu.default", "aten.sub.Tensor"],
        "poisoned": True,
        "deterministic_after": False,
    }
