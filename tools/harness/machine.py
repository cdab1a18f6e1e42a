"""What this machine is, for cache keys. Standard library only (no torch import, no CUDA init).

Caches live in a home folder that clusters often share between machines, so every key that
stands for a measured result names the hardware and the software that measured it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import shutil
import subprocess

TOOL_TIMEOUT_S = 5.0


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's marketing name (x86), or implementer/part codes where Linux gives no name (Arm)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if not sep:
                    if fields:  # the first processor's block is enough
                        break
                    continue
                fields.setdefault(key.strip().lower(), value.strip())
    except OSError:
        pass
    for key in ("model name", "hardware", "cpu model"):
        if fields.get(key):
            return fields[key]
    if "cpu part" in fields:
        return (
            f"{platform.machine()} implementer {fields.get('cpu implementer', '?')} "
            f"part {fields['cpu part']}"
        )
    return platform.processor() or platform.machine() or "unknown"


def _tool_output(argv: list[str]) -> str:
    """A tool's stdout, or '' when it is missing, slow or failing."""
    if shutil.which(argv[0]) is None:
        return ""
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


@functools.lru_cache(maxsize=4)
def fingerprint(device: str) -> dict[str, str]:
    """Device model, driver and CUDA, torch, Triton and compiler versions (cached per process)."""
    nvcc = _tool_output(["nvcc", "--version"]).splitlines()
    found = {
        "cpu": cpu_model(),
        "torch": _version("torch"),  # the local version carries the CUDA build, e.g. +cu130
        "triton": _version("triton"),
        "gcc": _tool_output(["gcc", "-dumpfullversion"]),
        "nvcc": nvcc[-1] if nvcc else "",
    }
    if device.startswith("cuda"):
        found["gpu"] = _tool_output(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
        )
    return found
