"""Evaluation settings and precision policies. Standard library only."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

HARNESS_VERSION = "2"  # 2: inputs are made on the device


@dataclass(frozen=True)
class Precision:
    """One `--precision` choice: tolerances and TF32 flags for both sides, and an optional cast."""

    name: str
    atol: float
    rtol: float
    allow_tf32: bool
    dtype: str | None  # floating inputs and parameters are cast to this dtype on both sides


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", 1e-4, 1e-4, False, None),
        Precision("tf32", 1e-3, 1e-3, True, None),
        Precision("fp16", 1e-2, 1e-2, False, "float16"),
        Precision("bf16", 1e-2, 1e-2, False, "bfloat16"),
    )
}

POLICIES = ("strict", "hybrid")


@dataclass
class EvalConfig:
    """Everything that changes an evaluation's result (and so its cache key)."""

    dsl: str
    device: str = "cpu"
    seeds: int = 3
    sets: dict[str, Any] = field(default_factory=dict)
    precision: str = "fp32"
    policy: str = "strict"
    extra_shapes: bool = False
    baseline_compile: bool = False
    profile: bool = True
    timeout_s: float = 300.0
    max_host_gb: float | None = None  # per worker; None = a fraction of the machine's memory
    threads: int = 0  # CPU threads for candidate and eager alike; 0 = all cores
    share_weights: bool = (
        False  # load the reference's state_dict into ModelNew (not KernelBench's protocol)
    )

    @property
    def precision_spec(self) -> Precision:
        return PRECISIONS[self.precision]

    def key_material(self) -> dict[str, Any]:
        data = asdict(self)  # limits included: a timeout under one limit says nothing of another
        data["harness_version"] = HARNESS_VERSION
        return data


def cache_key(code: str, task_hash: str, config: EvalConfig) -> str:
    """A verdict's key: the code, the task, the settings, and the machine that measured it
    (caches sit in homes that clusters share between machines)."""
    from tools.harness.machine import fingerprint

    digest = hashlib.sha256()
    digest.update(hashlib.sha256(code.encode()).digest())
    digest.update(task_hash.encode())
    digest.update(json.dumps(config.key_material(), sort_keys=True, default=repr).encode())
    digest.update(json.dumps(fingerprint(config.device), sort_keys=True).encode())
    return digest.hexdigest()[:32]
