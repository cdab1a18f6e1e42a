"""Building inputs and models the same way on every side. Standard library and torch only.

KernelBench's conventions, so its solutions run unchanged: inputs of seed s come from
`manual_seed(s); get_inputs()` (made on the device where get_inputs allows it); both models are built after `manual_seed(construct_seed)` from
the same init inputs, so a ModelNew that creates the same modules in the same order gets the
same weights; both run under no_grad in the reference model's train/eval mode.
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

import torch

from kernelgraph.tools.harness.config import Precision
from kernelgraph.tools.harness.exchange import to_device

CONSTRUCT_SEED = 42
TIMING_SEED = 1001  # the timing pool's second input set when only one seed is verified


@contextlib.contextmanager
def distributions_unchecked():
    """torch.distributions check their arguments' values (a `.item()`), which meta tensors
    lack; a sample's shape does not depend on them (KernelBench's losses draw from Pareto)."""
    checked = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(checked)


def verification_seeds(count: int) -> list[int]:
    return [CONSTRUCT_SEED + i for i in range(count)]


def pool_seeds(seeds: list[int]) -> list[int]:
    """The timing pool: two input sets that alternate, the first two verified where possible."""
    return seeds[:2] if len(seeds) >= 2 else [seeds[0], TIMING_SEED]


def reference_seeds(seeds: list[int]) -> list[int]:
    """Every seed the reference store holds inputs and outputs for."""
    return list(dict.fromkeys([*seeds, *pool_seeds(seeds)]))


def set_precision_flags(precision: Precision) -> None:
    torch.backends.cuda.matmul.allow_tf32 = precision.allow_tf32
    torch.backends.cudnn.allow_tf32 = precision.cudnn_tf32
    torch.set_float32_matmul_precision("high" if precision.allow_tf32 else "highest")


def set_threads(threads: int) -> None:
    if threads > 0:
        torch.set_num_threads(threads)


def make_inputs(task: ModuleType, seed: int, device: str = "cpu") -> list[Any]:
    """Inputs of `seed`, made straight on `device`: a 6 GB input then costs milliseconds, not
    ten seconds of CPU random numbers, and no host copy. A get_inputs that needs the CPU (numpy,
    explicit CPU tensors fed to CPU-only ops) falls back to it; values differ between the two
    ways, so every side of one evaluation calls this with the same device."""
    if device != "cpu":
        torch.manual_seed(seed)
        try:
            with torch.device(device):
                return list(task.get_inputs())
        except Exception:  # noqa: BLE001 - retried on the CPU, whose error is the one reported
            pass
    torch.manual_seed(seed)
    return list(task.get_inputs())


def make_init_inputs(task: ModuleType) -> list[Any]:
    torch.manual_seed(CONSTRUCT_SEED)
    return list(task.get_init_inputs())


def build_model(
    model_class: type,
    init_inputs: list[Any],
    device: str,
    precision: Precision,
    training: bool | None = None,
) -> torch.nn.Module:
    torch.manual_seed(CONSTRUCT_SEED)
    with torch.no_grad():
        model = model_class(*init_inputs)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{model_class.__name__}(...) did not return an nn.Module")
    model = model.to(device=device, dtype=getattr(torch, precision.dtype))  # floating ones only
    if training is not None:  # the candidate follows the reference's train/eval mode
        model.train(training)
    return model


def device_inputs(inputs: list[Any], device: str, precision: Precision) -> list[Any]:
    return to_device(list(inputs), device, precision.dtype)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
