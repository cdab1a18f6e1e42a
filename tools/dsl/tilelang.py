"""TileLang: tile-level GPU kernels (`@tilelang.jit`), compiled through TVM and nvcc.

TileLang reads the kernel's Python source, so candidates are imported from a real file.
Launches are counted by wrapping `JITKernel.__call__` (lazy and eager kernels both end there).

`compile_check` needs no GPU. TileLang 0.1.15 lowers and runs nvcc for an explicit target on a
CPU-only machine, so the check imports the candidate and runs its forward on CPU tensors with
three patches: every compile is forced to the target (`{"kind": "cuda", "arch": target}`,
tvm_ffi backend), launching a compiled kernel returns empty outputs of the declared shapes
instead of running, and TileLang's nvcc callback is wrapped to measure the cubins it produces.
TileLang's caches are disabled for the check so that every kernel is really compiled.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import traceback
from pathlib import Path

import torch

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

_NVCC_CALLBACK = "tilelang_callback_cuda_compile"
# Functions of tilelang/jit/__init__.py that elaborate and compile; errors raised under them are
# compile errors (running an eager kernel also passes through that file, in __call__).
_COMPILE_FRAMES = {"compile", "par_compile", "get_tir"}


def _kernel_name(kernel) -> str:
    return str(kernel.prim_func.attrs.get("global_symbol", "tilelang_kernel"))


class TileLangAdapter(DslAdapter):
    name = "tilelang"
    devices = ("cuda",)
    description = "TileLang kernels (@tilelang.jit) compiled through TVM for NVIDIA GPUs."

    def install_launch_counter(self, counter: LaunchCounter, device: str) -> None:
        from tilelang.jit.kernel import JITKernel

        patch_launches(JITKernel, "__call__", counter, lambda k, a, kw: _kernel_name(k))

    def compile_check(
        self,
        path: Path,
        target: str = "sm_90a",
        init_inputs: list | None = None,
        inputs: list | None = None,
        device: str = "cpu",
    ) -> CompileReport:
        report = CompileReport(ok=False, target=target)
        try:
            cuda_arch(target)
            with _compile_only({"kind": "cuda", "arch": target}) as (kernels, cubins):
                module = import_file(Path(path))
                trace_forward(module, init_inputs, inputs, device)
        except Exception as exc:
            report.message = describe_error(exc, path)
            return report
        report.kernels = list(dict.fromkeys(_kernel_name(k) for k in kernels))
        report.artifacts = {
            "cuda": sum(len(k.get_kernel_source()) for k in kernels),
            "cubin": sum(cubins),
        }
        report.ok = bool(kernels)
        report.message = "" if kernels else "the forward compiled no TileLang kernel"
        return report

    def is_compile_error(self, exc: BaseException) -> bool:
        if raised_as(
            exc, "tvm.error.DiagnosticError", "tilelang.jit.exceptions.EagerJITBuildError"
        ):
            return True  # T.prim_func parse errors, eager-mode build errors
        return any(
            frame.f_code.co_name in _COMPILE_FRAMES
            and Path(frame.f_code.co_filename).match("tilelang/jit/__init__.py")
            for frame, _ in traceback.walk_tb(exc.__traceback__)
        )

    def version(self) -> str:
        return package_version("tilelang")


@contextlib.contextmanager
def _compile_only(target: dict):
    """Force compiles to `target`, turn launches into no-ops; yield (kernels, cubin sizes)."""
    import tilelang
    import tvm_ffi
    from tilelang.jit.kernel import JITKernel

    kernels: list = []
    cubins: list[int] = []
    jit_module = importlib.import_module("tilelang.jit")  # `tilelang.jit` is the decorator
    compile_fn = jit_module.compile
    signature = inspect.signature(compile_fn)

    def forced_compile(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.arguments.update(target=target, target_host=None, execution_backend="tvm_ffi")
        kernel = compile_fn(*bound.args, **bound.kwargs)
        kernels.append(kernel)
        return kernel

    nvcc_callback = tvm_ffi.get_global_func(_NVCC_CALLBACK)

    def measured_nvcc(*args):
        binary = nvcc_callback(*args)
        cubins.append(len(binary))
        return binary

    cache_was_enabled = tilelang.is_cache_enabled()
    saved_call = JITKernel.__call__
    tilelang.disable_cache()
    jit_module.compile = tilelang.compile = forced_compile
    JITKernel.__call__ = _placeholder_outputs
    tvm_ffi.register_global_func(_NVCC_CALLBACK, f=measured_nvcc, override=True)
    try:
        yield kernels, cubins
    finally:
        tvm_ffi.register_global_func(_NVCC_CALLBACK, f=nvcc_callback, override=True)
        JITKernel.__call__ = saved_call
        jit_module.compile = tilelang.compile = compile_fn
        if cache_was_enabled:
            tilelang.enable_cache()


def _placeholder_outputs(kernel, *args, **kwargs):
    """What a launch returns, without launching: empty tensors for the `out_idx` outputs, with
    symbolic dimensions resolved from the input tensors' shapes."""
    outputs = kernel.out_idx
    inputs = [p for i, p in enumerate(kernel.params) if i not in outputs]
    sizes: dict[str, int] = {}
    for param, arg in zip(inputs, args, strict=False):
        for dim, size in zip(param.shape, getattr(arg, "shape", ()), strict=False):
            sizes.setdefault(str(dim), int(size))
    results = []
    for index in outputs:
        param = kernel.params[index]
        shape = [d if isinstance(d, int) else sizes.get(str(d), 1) for d in param.shape]
        results.append(torch.empty(shape, dtype=param.torch_dtype()))
    if not results:
        return None
    return results[0] if len(results) == 1 else results
