"""C++ with OpenMP on the CPU.

Two candidate forms are accepted:

- `torch.utils.cpp_extension.load_inline(...)`, the standalone form (the file needs torch only):
  what the builtin model, the examples and the DSL docs write. With `no_implicit_headers=True`
  and Python C API bindings that take tensors as their `data_ptr()` (tools/dsl/cpp_bindings.py
  writes them from the `extern "C"` declarations) a cold build costs about the kernel's own compile; with torch's
  headers and `torch::Tensor` arguments about 20-30 s. torch caches builds by name and source
  in TORCH_EXTENSIONS_DIR.
- `build_library(source)` from this module compiles `source` with
  `g++ -O3 -march=native -fopenmp -shared -fPIC -std=c++17` into a plain shared library (about
  0.2 s; cached by source, flags, compiler and machine in KERNELGRAPH_BUILD_CACHE, default
  ~/.cache/kernelgraph/build) and returns a `NativeLibrary`. Candidates may not use ctypes
  themselves, so this module owns the foreign-function calls. A file that uses it imports
  kernelgraph, so it does not run on its own.

Calling convention of a `NativeLibrary`: `lib.name(*args)` calls the `extern "C"` function
`name`, which must return `void`. Each argument is converted by its Python type:

    torch.Tensor (CPU)  -> void*    (its data_ptr(); the C code sees raw memory, so pass
                                      contiguous tensors or pass the strides too)
    bool, int           -> int64_t
    float               -> double

so scalar parameters of the C function must be declared `int64_t` or `double`. Example:

    extern "C" void relu(const float* x, float* out, int64_t n) { ... }
    lib = build_library(SOURCE); lib.relu(x, out, x.numel())
"""

from __future__ import annotations

import ctypes
import functools
import platform
from pathlib import Path
from types import ModuleType

import torch

from kernelgraph.tools.dsl.base import (
    CompileReport,
    DslAdapter,
    LaunchCounter,
    NativeSource,
    describe_error,
    import_file,
)
from kernelgraph.tools.dsl.cpp_bindings import OPT_FLAGS
from kernelgraph.tools.dsl.inline_ext import (
    ExtensionProxy,
    NativeBuildError,
    compile_cached,
    find_native_sources,
    install,
    is_build_error,
    record_launch,
    tool_version,
)

__all__ = ["CppAdapter", "NativeBuildError", "NativeLibrary", "build_library"]

COMPILER = "g++"
FLAGS = (*OPT_FLAGS, "-shared", "-fPIC", "-std=c++17")
_built: list[NativeLibrary] = []  # libraries built in this process, for the compile report


def build_library(
    source: str, name: str = "kernel", extra_cflags: tuple[str, ...] = ()
) -> NativeLibrary:
    """Compile C++ `source` into a shared library (cached) and load it.

    Raises NativeBuildError with g++'s messages when the source does not compile.
    """
    command = [COMPILER, *FLAGS, *extra_cflags]
    library = NativeLibrary(compile_cached(command, source, ".cpp", ".so", key=_machine()), name)
    _built.append(library)
    return library


class NativeLibrary:
    """A loaded shared library whose `extern "C"` functions are called by attribute."""

    def __init__(self, path: Path, name: str = "kernel") -> None:
        self.path = Path(path)
        self.name = name
        self._lib = ctypes.CDLL(str(self.path))
        self._functions: dict[str, object] = {}

    def __getattr__(self, symbol: str):
        if symbol.startswith("_"):
            raise AttributeError(symbol)
        if symbol not in self._functions:
            self._functions[symbol] = self._bind(symbol)
        return self._functions[symbol]

    def _bind(self, symbol: str):
        try:
            function = getattr(self._lib, symbol)
        except AttributeError:
            raise AttributeError(
                f'{self.name}: no extern "C" function {symbol!r} in the library'
            ) from None
        function.restype = None
        label = f"{self.name}.{symbol}"

        def call(*args) -> None:
            converted = [_c_argument(symbol, i, a) for i, a in enumerate(args)]
            record_launch(label)
            function(*converted)

        call.__name__ = call.__qualname__ = symbol
        return call

    def __repr__(self) -> str:
        return f"<NativeLibrary {self.name} at {self.path}>"


def _c_argument(symbol: str, index: int, value):
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise TypeError(f"{symbol}: argument {index} is on {value.device}, not the CPU")
        return ctypes.c_void_p(value.data_ptr())
    if isinstance(value, int):  # bool included
        return ctypes.c_int64(value)
    if isinstance(value, float):
        return ctypes.c_double(value)
    raise TypeError(
        f"{symbol}: argument {index} is a {type(value).__name__}; "
        "pass torch.Tensor, int, bool or float"
    )


@functools.cache
def _machine() -> str:
    """The CPU model, part of the cache key because of -march=native."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return f"{platform.machine()} {model.strip()}"


def _extensions(module: ModuleType) -> list[ModuleType]:
    """The compiled extension modules (load_inline's) that the candidate binds at module level."""
    found: list[ModuleType] = []
    for value in vars(module).values():
        if isinstance(value, ExtensionProxy):
            value = value._module
        if isinstance(value, ModuleType) and str(getattr(value, "__file__", "")).endswith(".so"):
            if all(value is not other for other in found):
                found.append(value)
    return found


def _functions(extension: ModuleType) -> list[str]:
    return sorted(
        n for n in dir(extension) if not n.startswith("_") and callable(getattr(extension, n))
    )


class CppAdapter(DslAdapter):
    name = "cpp"
    devices = ("cpu",)
    description = "C++ with OpenMP on the CPU: torch's load_inline(...) or build_library(...)."

    def install_launch_counter(self, counter: LaunchCounter, device: str) -> None:
        install(counter)

    def compile_target(self, device: str) -> str | None:
        return "cpu"

    def compile_check(
        self,
        path: Path,
        target: str = "cpu",
        init_inputs: list | None = None,
        inputs: list | None = None,
        device: str = "cpu",  # nothing runs: the build is the check
    ) -> CompileReport:
        """Import the candidate (which builds its library) and construct ModelNew."""
        report = CompileReport(ok=False, target=target)
        if target != "cpu":
            report.message = f"cpp compiles for the cpu target only, not {target!r}"
            return report
        start = len(_built)
        try:
            module = import_file(Path(path))
            module.ModelNew(*(init_inputs or []))
        except Exception as exc:
            report.message = str(exc) if is_build_error(exc) else describe_error(exc, path)
            return report
        libraries = _built[start:]
        extensions = _extensions(module)
        report.kernels = [lib.name for lib in libraries]
        report.kernels += [name for ext in extensions for name in _functions(ext)]
        files = [lib.path for lib in libraries] + [Path(ext.__file__) for ext in extensions]
        report.artifacts = {"so": sum(f.stat().st_size for f in files)} if files else {}
        report.ok = True
        return report

    def is_compile_error(self, exc: BaseException) -> bool:
        return is_build_error(exc)

    def native_sources(self, source: str) -> list[NativeSource]:
        return find_native_sources(source)

    def version(self) -> str:
        return (tool_version(COMPILER).splitlines() or [""])[0]
