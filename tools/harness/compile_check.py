"""Worker role `compile`: compile a candidate for an explicit target, without the device."""

from __future__ import annotations

from pathlib import Path

import torch

from kernelgraph.tools.dsl import get_adapter
from kernelgraph.tools.harness.tensorfile import load_values


def run(spec: dict) -> dict:
    adapter = get_adapter(spec["dsl"])
    in_dir = Path(spec["inputs_dir"])
    device = spec.get("device", "cpu")
    if device != "cpu" and not torch.cuda.is_available():
        device = "cpu"
    init_inputs = load_values(in_dir / "init.tf")
    inputs = load_values(in_dir / f"inputs_{spec['seed']}.tf", device)
    report = adapter.compile_check(
        Path(spec["kernel"]), spec["target"], init_inputs, inputs, device
    )
    return {"compile": report.__dict__}
