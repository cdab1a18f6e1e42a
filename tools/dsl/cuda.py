"""CUDA C built by torch's `load_inline(cuda_sources=...)` on a GPU.

Launches are counted by the shared load_inline wrapping (`kernelgraph.tools.dsl.inline_ext`).
`compile_check` needs no GPU: it compiles each `cuda_sources` argument to a cubin with nvcc for
the explicit target, with the flags and include paths torch's extension build uses (C++20, as
torch 2.13 requires). Host code is only parsed, not linked, so where the toolkit lacks the
cuBLAS/cuSPARSE/cuSOLVER headers that ATen/cuda/CUDAContext.h includes, opaque-handle stubs
stand in for them (added with -isystem, so real headers win when present).
"""

from __future__ import annotations

import os
import re
import shutil
import sysconfig
from pathlib import Path

import torch

from kernelgraph.tools.dsl.base import (
    CompileReport,
    DslAdapter,
    LaunchCounter,
    NativeSource,
    cuda_arch,
)
from kernelgraph.tools.dsl.inline_ext import (
    NativeBuildError,
    build_cache_dir,
    compile_cached,
    find_native_sources,
    install,
    is_build_error,
    tool_version,
)

# What load_inline puts in front of cuda_sources.
IMPLICIT_HEADERS = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"

_STUB_HEADERS = {
    "cublas_v2.h": "typedef struct cublasContext* cublasHandle_t;\n"
    "typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;\n",
    "cublasLt.h": "typedef struct cublasLtContext* cublasLtHandle_t;\n",
    "cusparse.h": "typedef struct cusparseContext* cusparseHandle_t;\n"
    "typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;\n"
    "const char* cusparseGetErrorString(cusparseStatus_t);\n",
    "cusolver_common.h": "typedef enum { CUSOLVER_STATUS_SUCCESS = 0 } cusolverStatus_t;\n",
    "cusolverDn.h": "#include <cusolver_common.h>\n"
    "typedef struct cusolverDnContext* cusolverDnHandle_t;\n",
}

_KERNEL_NAME = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)")


def nvcc() -> str:
    from torch.utils.cpp_extension import CUDA_HOME

    return shutil.which("nvcc") or str(Path(CUDA_HOME or "/usr/local/cuda") / "bin" / "nvcc")


def nvcc_command(target: str) -> list[str]:
    """nvcc flags for a device-only compile of a load_inline CUDA source for `target`.

    Hopper/Blackwell-only instructions need the `-gencode=arch=compute_90a,code=sm_90a` form.
    """
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS, include_paths

    major, suffix = cuda_arch(target)
    arch = f"{major}{suffix}"
    includes = [f"-I{p}" for p in (*include_paths(), sysconfig.get_path("include"))]
    return [
        nvcc(),
        f"-gencode=arch=compute_{arch},code=sm_{arch}",
        "-cubin",
        "-std=c++20",
        *includes,
        "-isystem",
        str(_stub_dir()),
        "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE",  # the CPU wheel lacks cuda_cmake_macros.h
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        "-DTORCH_EXTENSION_NAME=kernelgraph_check",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        *COMMON_NVCC_FLAGS,
    ]


def compile_cuda_source(code: str, target: str) -> Path:
    """Compile one load_inline CUDA source to a cubin (cached); raises NativeBuildError."""
    source = (
        f'{IMPLICIT_HEADERS}#line 1 "cuda_sources"\n{code}'  # errors cite the candidate's lines
    )
    return compile_cached(nvcc_command(target), source, ".cu", ".cubin")


def _stub_dir() -> Path:
    directory = build_cache_dir() / "cuda-stubs"
    directory.mkdir(exist_ok=True)
    for name, body in _STUB_HEADERS.items():
        path = directory / name
        if not path.exists():
            tmp = path.with_name(f"{name}.{os.getpid()}.tmp")
            tmp.write_text(f"#pragma once\n{body}")
            tmp.replace(path)
    return directory


class CudaAdapter(DslAdapter):
    name = "cuda"
    devices = ("cuda",)
    description = "CUDA C kernels built with torch.utils.cpp_extension.load_inline."

    def install_launch_counter(self, counter: LaunchCounter, device: str) -> None:
        install(counter)

    def compile_check(
        self,
        path: Path,
        target: str = "sm_90a",
        init_inputs: list | None = None,
        inputs: list | None = None,
        device: str = "cpu",  # nothing runs: the build is the check
    ) -> CompileReport:
        """nvcc each `cuda_sources` argument found in the candidate; nothing is imported."""
        report = CompileReport(ok=False, target=target)
        try:
            cuda_arch(target)
        except ValueError as exc:
            report.message = str(exc)
            return report
        sources = [s for s in find_native_sources(Path(path).read_text()) if s.lang == "cuda"]
        unresolved = [s.origin for s in sources if not s.code]
        if not sources or unresolved:
            report.message = (
                f"cannot read the CUDA source statically: {', '.join(unresolved)}"
                if unresolved
                else "no load_inline(cuda_sources=...) found"
            )
            return report
        try:
            cubins = [compile_cuda_source(s.code, target) for s in sources]
        except NativeBuildError as exc:
            report.message = str(exc)
            return report
        report.ok = True
        report.artifacts = {"cubin": sum(c.stat().st_size for c in cubins)}
        report.kernels = [k for s in sources for k in _KERNEL_NAME.findall(s.code)]
        return report

    def is_compile_error(self, exc: BaseException) -> bool:
        return is_build_error(exc)

    def native_sources(self, source: str) -> list[NativeSource]:
        return find_native_sources(source)

    def version(self) -> str:
        release = [line for line in tool_version(nvcc()).splitlines() if "release" in line]
        return release[0].strip() if release else (torch.version.cuda or "")
