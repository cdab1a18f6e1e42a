"""Triton: GPU kernels, run on the CPU through Triton's interpreter (TRITON_INTERPRET=1).

Launches are counted by wrapping `JITFunction.run` (GPU) and `InterpretedFunction.run`
(interpreter, where launch hooks never fire); autotuned and heuristic kernels end in one of
them. `compile_check` compiles every kernel the forward launches for an explicit GPU target with
`triton.compile`, which works on a machine without a GPU (ptxas ships with Triton).
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from kernelgraph.tools.dsl.base import (
    CompileReport,
    DslAdapter,
    LaunchCounter,
    cuda_arch,
    describe_error,
    import_file,
    package_version,
    patch_launches,
    raised_as,
    trace_forward,
)

_COMPILE_ERRORS = (
    "triton.compiler.errors.CompilationError",
    "triton.runtime.errors.PTXASError",
    "triton.runtime.errors.OutOfResources",  # the autotuner treats it like a failed compile
    "triton.language.semantic.IncompatibleTypeErrorImpl",  # raised directly by the interpreter
)
_INTERPRETER_ERROR = "triton.runtime.errors.InterpreterError"


def _launch_name(fn, args, kwargs) -> str | None:
    return None if kwargs.get("warmup") else fn.fn.__name__


class TritonAdapter(DslAdapter):
    name = "triton"
    devices = ("cuda", "cpu")
    description = "Triton kernels (@triton.jit); on CPU through the Triton interpreter."

    def child_env(self, device: str) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1"} if device == "cpu" else {}

    def prepare_child(self, device: str) -> None:
        if device == "cpu":
            fix_interpreter_index()

    def install_launch_counter(self, counter: LaunchCounter, device: str) -> None:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        patch_launches(JITFunction, "run", counter, _launch_name)
        # The interpreter's own torch use is layout-only (free ops), so ops inside an interpreted
        # kernel stay recorded: torch compute smuggled into a kernel body is seen.
        patch_launches(InterpretedFunction, "run", counter, _launch_name)
        # Benchmarking configs (cache flushes, timing launches) is tuning, not the forward. The
        # interpreter cannot time configs (no driver): it takes the first one.
        bench = _as_internal if device == "cuda" else _first_config
        Autotuner._bench = bench(Autotuner._bench, counter)

    def compile_check(
        self,
        path: Path,
        target: str,
        init_inputs: list | None = None,
        inputs: list | None = None,
        device: str = "cpu",
    ) -> CompileReport:
        report = CompileReport(ok=False, target=target)
        try:
            major, _ = cuda_arch(target)
            with _compiling_instead_of_launching(major) as compiled:
                with _without_interpreter():
                    module = import_file(Path(path))
                trace_forward(module, init_inputs, inputs, device)
        except Exception as exc:  # the candidate's or the compiler's error, reported as text
            report.message = describe_error(exc, path)
            return report
        report.kernels = list(dict.fromkeys(k.name for k in compiled.values()))
        for kernel in compiled.values():
            for kind in ("ptx", "cubin"):
                report.artifacts[kind] = report.artifacts.get(kind, 0) + len(kernel.asm[kind])
        report.ok = bool(compiled)
        report.message = "" if compiled else "the forward launched no Triton kernel"
        return report

    def is_compile_error(self, exc: BaseException) -> bool:
        # The interpreter wraps what the compiler would have refused (a type error, say).
        while raised_as(exc, _INTERPRETER_ERROR) and exc.__cause__ is not None:
            exc = exc.__cause__
        return raised_as(exc, *_COMPILE_ERRORS)

    def notes(self, device: str, dtypes: set[str]) -> list[str]:
        if device == "cpu" and "bfloat16" in dtypes:
            return [
                "The Triton interpreter mishandles bfloat16 arithmetic on CPU: results may be "
                "wrong even for a correct kernel; verify bfloat16 kernels on a GPU."
            ]
        return []

    def version(self) -> str:
        return package_version("triton")


def fix_interpreter_index() -> None:
    """Triton 3.6's interpreter takes `int()` of a 1-element array wherever a kernel uses a
    runtime value as an index (`range(tl.program_id(0), n, ...)`, a runtime `n`), which numpy
    >= 2.4 refuses (triton-lang/triton#9171, fixed upstream by #9172). Patch `__index__` the
    fixed way; idempotent."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "_index_fixed", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._index_fixed = True
    interpreter._patch_lang_tensor = patched


def _as_internal(method, counter: LaunchCounter):
    original = getattr(method, "__kg_original__", method)

    @functools.wraps(original)
    def internal(*args, **kwargs):
        with counter.internal():
            return original(*args, **kwargs)

    internal.__kg_original__ = original
    return internal


def _first_config(method, counter: LaunchCounter):
    """An Autotuner._bench that times nothing: every config ties and the first one wins."""

    def untimed(tuner, *args, config, **kwargs):
        return [0.0, 0.0, 0.0]

    untimed.__kg_original__ = getattr(method, "__kg_original__", method)
    return untimed


@contextlib.contextmanager
def _without_interpreter():
    """Import with real JITFunctions even when the worker inherited TRITON_INTERPRET."""
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved


@contextlib.contextmanager
def _compiling_instead_of_launching(major: int):
    """Make every launch compile the kernel for `sm_<major>` instead of running it.

    Specialisation (dtypes, divisibility, constexprs) comes from the actual arguments, as in a
    real launch, but uses a backend built for the explicit target instead of the (absent)
    driver's. Autotuned kernels compile every config. Yields {hash: CompiledKernel}.
    """
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction, create_function_from_signature

    target = GPUTarget("cuda", major, 32)
    backend = make_backend(target)
    binders: dict[int, object] = {}
    compiled: dict[str, object] = {}

    def compile_launch(fn, *args, grid=None, warmup=False, **kwargs):
        kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        if id(fn) not in binders:
            binders[id(fn)] = create_function_from_signature(fn.signature, fn.params, backend)
        bound, specialization, options = binders[id(fn)](*args, **kwargs)
        options, signature, constexprs, attrs = fn._pack_args(
            backend, kwargs, bound, specialization, options
        )
        source = ASTSource(fn, signature, constexprs, attrs)
        kernel = triton.compile(source, target=target, options=options.__dict__)
        compiled[kernel.hash] = kernel
        return kernel

    def tune_all(tuner, *args, **kwargs):
        result = None
        for config in tuner.configs:
            result = tuner.fn.run(*args, **kwargs, **config.all_kwargs())
        return result

    saved = JITFunction.run, Autotuner.run
    JITFunction.run, Autotuner.run = compile_launch, tune_all
    try:
        yield compiled
    finally:
        JITFunction.run, Autotuner.run = saved
