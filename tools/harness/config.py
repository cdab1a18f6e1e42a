"""Evaluation settings and precision policies. Standard library only."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# 2: inputs made on the device; 3: fp32 lets cuDNN use TF32 (torch default); 4: fp32 casts
HARNESS_VERSION = "4"


@functools.cache
def harness_digest() -> str:
    """A hash of the harness's and the DSL adapters' source. It keys cached verdicts, so a
    verdict is only reused by the code that reached it: a changed rule meets no old verdict."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([*here.glob("*.py"), *(here.parent / "dsl").glob("*.py")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Precision:
    """One `--precision` choice: tolerances and TF32 flags for both sides, and an optional cast.

    `fp32` is PyTorch's default and KernelBench's: matmuls in IEEE fp32, cuDNN convolutions
    free to use TF32. A conv kernel is then judged against what PyTorch computes, which is what
    KernelBench's evaluator does too. `ieee` turns TF32 off everywhere. Every precision casts
    floating inputs and parameters to its dtype, as KernelBench's evaluator does: an fp16 task
    run at fp32 is judged in fp32, where a 1e-4 tolerance means something."""

    name: str
    atol: float
    rtol: float
    allow_tf32: bool  # matmuls (torch.backends.cuda.matmul, float32_matmul_precision)
    dtype: str  # floating inputs and parameters are cast to this dtype on both sides
    cudnn_tf32: bool = False  # convolutions (torch.backends.cudnn.allow_tf32)


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", 1e-4, 1e-4, False, "float32", cudnn_tf32=True),
        Precision("ieee", 1e-4, 1e-4, False, "float32"),
        Precision("tf32", 1e-3, 1e-3, True, "float32", cudnn_tf32=True),
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
        data["harness_source"] = harness_digest()
        return data


def cache_key(code: str, task_hash: str, config: EvalConfig) -> str:
    """A verdict's key: the code, the task, the settings, and the machine that measured it
    (caches sit in homes that clusters share between machines)."""
    from kernelgraph.tools.harness.machine import fingerprint

    digest = hashlib.sha256()
    digest.update(hashlib.sha256(code.encode()).digest())
    digest.update(task_hash.encode())
    digest.update(json.dumps(config.key_material(), sort_keys=True, default=repr).encode())
    digest.update(json.dumps(fingerprint(config.device), sort_keys=True).encode())
    return digest.hexdigest()[:32]
