"""The environment record stored with every verdict. Standard library and torch only.

Timings are only comparable between runs on the same hardware and software, so each verdict
carries what decides its numbers. The record is hostname-free and names only the environment
variables listed in ENV_VARS: the environment may hold API keys, so it is never copied whole.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess

import torch

from kernelgraph.tools.harness.machine import cpu_model

# The only environment variables recorded: each one changes timings or numerics.
ENV_VARS = ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")

# nvidia-smi fields -> record keys. The clocks show whether a GPU was throttled or locked.
SMI_FIELDS = {
    "uuid": "uuid",
    "driver_version": "driver_version",
    "clocks.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz",
    "clocks.max.mem": "mem_clock_max_mhz",
}
SMI_TIMEOUT_S = 3.0


@functools.lru_cache(maxsize=1)
def _nvidia_smi() -> tuple[dict[str, str], ...]:
    """One nvidia-smi query per process; empty when it is missing, slow or failing."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ()
    query = ",".join(SMI_FIELDS)
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=SMI_TIMEOUT_S,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    rows = []
    for line in out.strip().splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(SMI_FIELDS):
            rows.append(dict(zip(SMI_FIELDS.values(), values, strict=True)))
    return tuple(rows)


def _smi_number(value: str | None) -> float | str | None:
    if value is None or value in ("[N/A]", "N/A", ""):
        return None
    try:
        return float(value)
    except ValueError:
        return value


def _smi_for(uuid: str) -> dict[str, object]:
    """nvidia-smi's row for one GPU, matched by UUID (its indices ignore CUDA_VISIBLE_DEVICES)."""
    rows = _nvidia_smi()
    want = uuid.lower().removeprefix("gpu-")
    row = next((r for r in rows if r["uuid"].lower().removeprefix("gpu-") == want), None)
    if row is None:
        return {"driver_version": rows[0]["driver_version"] if rows else None}
    return {k: (v if k == "driver_version" else _smi_number(v)) for k, v in row.items()}


def _gpu_info(device: str) -> dict[str, object]:
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(index)
    uuid = str(getattr(props, "uuid", "") or "")
    smi = _smi_for(uuid)
    smi.pop("uuid", None)
    return {
        "gpu_name": props.name,
        "gpu_count": torch.cuda.device_count(),
        "compute_capability": f"{props.major}.{props.minor}",
        "gpu_memory_gib": round(props.total_memory / 2**30, 1),
        "sm_count": props.multi_processor_count,
        "cuda_runtime": torch.version.cuda or getattr(torch.version, "hip", None),
        "cudnn_version": torch.backends.cudnn.version()
        if torch.backends.cudnn.is_available()
        else None,
        **smi,
    }


def collect_env(device: str, dsl_version: str = "") -> dict[str, object]:
    """What decides a verdict's timings: hardware, drivers, library versions, thread settings."""
    env: dict[str, object] = {
        "device": device,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(terse=True),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "dsl_version": dsl_version,
    }
    env.update({name.lower(): os.environ.get(name) for name in ENV_VARS})
    if device.startswith("cuda") and torch.cuda.is_available():
        env.update(_gpu_info(device))
    return env
