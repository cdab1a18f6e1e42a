"""The DSL adapter interface. Standard library and torch only: adapters run inside the harness.

An adapter is used in three places:
- the parent (no candidate code runs there): `native_sources` for static checks, `notes`;
- the candidate worker process: `child_env`, `prepare_child`, `install_launch_counter`,
  `load_module`;
- the compile-check worker process: `compile_check` (for an explicit target, even without
  the device).
DSL imports (triton, tilelang) happen inside methods, never at module import time, so that
`kernelgraph.tools.dsl` imports on a machine that lacks a DSL.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import re
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType


@dataclass
class NativeSource:
    """A C++ or CUDA source string found in a candidate (for the token allow-list check)."""

    lang: str  # "cpp" or "cuda"
    code: str
    origin: str = ""  # e.g. "cuda_sources (line 12)"


@dataclass
class CompileReport:
    ok: bool
    target: str
    message: str = ""
    artifacts: dict[str, int] = field(default_factory=dict)  # artifact kind -> size in bytes
    kernels: list[str] = field(default_factory=list)


class LaunchCounter:
    """Counts launches of kernels of one DSL in the candidate process.

    `internal()` marks harness-owned code (e.g. the Triton interpreter's own tensor ops), so
    the ATen-op recorder can ignore the ops executed inside it.
    """

    def __init__(self) -> None:
        self.count = 0
        self.names: dict[str, int] = {}
        self._local = threading.local()

    def record(self, name: str) -> None:
        self.count += 1
        self.names[name] = self.names.get(name, 0) + 1

    @property
    def inside(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    @contextlib.contextmanager
    def internal(self):
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1


class DslAdapter:
    """One kernel language. Subclasses set `name`/`devices` and override what differs."""

    name: str = ""
    devices: tuple[str, ...] = ()  # devices it can run on: "cuda", "cpu"
    language: str = "python"  # the language of the candidate file
    description: str = ""

    def child_env(self, device: str) -> dict[str, str]:
        """Extra environment for the candidate process (e.g. TRITON_INTERPRET=1 on CPU)."""
        return {}

    def prepare_child(self, device: str) -> None:
        """Set the DSL up in the candidate process, before anything of the candidate's runs
        (e.g. work around a bug of the installed version)."""

    def install_launch_counter(self, counter: LaunchCounter, device: str) -> None:
        """Patch this DSL's launch path in the current (candidate) process to count launches.

        Called before the candidate module is imported.
        """
        raise NotImplementedError

    def load_module(self, path: Path) -> ModuleType:
        """Import the candidate file as a module (in the candidate process)."""
        return import_file(path)

    def compile_check(
        self,
        path: Path,
        target: str,
        init_inputs: list | None = None,
        inputs: list | None = None,
        device: str = "cpu",
    ) -> CompileReport:
        """Compile the candidate for `target` (e.g. "sm_90a", "cpu") without needing the device.

        Runs in a sandboxed worker process and may import the candidate module. `init_inputs`
        and `inputs` (tensors on `device`, and plain values) let adapters whose kernels are
        specialised at launch (Triton, TileLang) trace its launches without running them.
        """
        raise NotImplementedError

    def compile_target(self, device: str) -> str | None:
        """What the graph's compiler node checks against on `device`; None when there is no
        separate compile step (the verifier's first run is the compile, e.g. interpreted)."""
        return local_cuda_target() if device.startswith("cuda") else None

    def is_compile_error(self, exc: BaseException) -> bool:
        """Whether an exception raised while importing or first running the candidate is a
        build/compile failure of this DSL (verdict `compile_error`) rather than a crash."""
        return False

    def native_sources(self, source: str) -> list[NativeSource]:
        """C++/CUDA source strings embedded in the candidate, for the static token check."""
        return []

    def notes(self, device: str, dtypes: set[str]) -> list[str]:
        """Warnings to show the user for this device and these input/output dtypes."""
        return []

    def version(self) -> str:
        return ""


def import_file(path: Path, name: str = "candidate_module") -> ModuleType:
    """Import a Python file from disk as a real module (TileLang and Triton read the source)."""
    path = Path(path).resolve()
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def patch_launches(
    owner: type, attr: str, counter: LaunchCounter, kernel_name: Callable, internal: bool = False
) -> None:
    """Wrap the launch method `owner.attr` so each launch records `kernel_name(self, args,
    kwargs)` in `counter` (None means "not a launch", e.g. a warm-up).

    With `internal`, the launch runs inside `counter.internal()`: the DSL's own tensor ops are
    not the candidate's. Launches from harness-internal code are not counted. Re-patching
    replaces the previous counter instead of stacking wrappers.
    """
    original = getattr(owner, attr)
    original = getattr(original, "__kg_original__", original)

    @functools.wraps(original)
    def launch(self, *args, **kwargs):
        name = None if counter.inside else kernel_name(self, args, kwargs)
        if name is None:
            return original(self, *args, **kwargs)
        counter.record(name)
        if not internal:
            return original(self, *args, **kwargs)
        with counter.internal():
            return original(self, *args, **kwargs)

    launch.__kg_original__ = original
    setattr(owner, attr, launch)


def raised_as(exc: BaseException, *qualnames: str) -> bool:
    """Whether `exc` is an instance of a class named "module.QualName", without importing it
    (the DSL may be absent in the calling process)."""
    names = {f"{cls.__module__}.{cls.__qualname__}" for cls in type(exc).__mro__}
    return not names.isdisjoint(qualnames)


def cuda_arch(target: str) -> tuple[int, str]:
    """Split a CUDA target like "sm_90a" into (90, "a"); the GPU adapters' compile checks take
    the same target strings."""
    match = re.fullmatch(r"sm_(\d+)([af]?)", target.strip())
    if match is None:
        raise ValueError(f"not a CUDA target: {target!r} (expected e.g. sm_90a, sm_90, sm_80)")
    return int(match.group(1)), match.group(2)


def local_cuda_target() -> str | None:
    """This machine's first GPU as a target string ("sm_90a" on Hopper), or None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def package_version(distribution: str) -> str:
    """Installed version of a DSL's package, without importing it ("" when absent)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


def describe_error(exc: BaseException, path: Path) -> str:
    """The error as "Type: message (candidate line N)", N being the innermost line of the
    candidate file in the traceback: what a report shows instead of a traceback through our
    code."""
    path = Path(path).resolve()
    lines = [
        line
        for frame, line in traceback.walk_tb(exc.__traceback__)
        if Path(frame.f_code.co_filename) == path
    ]
    where = f" (candidate line {lines[-1]})" if lines else ""
    return f"{type(exc).__name__}: {exc}{where}"


def trace_forward(module: ModuleType, init_inputs: list | None, inputs: list | None, device: str):
    """Build ModelNew and call it once, so that a compile check sees every launch. On the device
    where there is one: a library call in the forward (a conv at KernelBench size) takes seconds
    on the CPU."""
    import torch

    model = module.ModelNew(*(init_inputs or []))
    if device != "cpu" and isinstance(model, torch.nn.Module):
        model = model.to(device)
    with torch.no_grad():
        model(*(inputs or []))
