"""The C++ (OpenMP, CPU) backend of the builtin model: tunables, default configs, launches.

Each kernel is C++ source in a Python string, built once by `tools.dsl.cpp.build_library`
(cached by source hash). Tuning values are run-time arguments of the C function, so a config
change is not a rebuild: a launch is `_k0.k0_name(inputs..., outputs..., threads, ...)`.
"""

from __future__ import annotations

import os
from typing import Any

from tools.builtin import cpp_emit
from tools.builtin.kernels import FusedKernel, GemmKernel

PRELUDE = f'''import torch
import torch.nn as nn

from tools.dsl.cpp import build_library

_HELPERS = r"""{cpp_emit.HELPERS}"""
_FLAGS = ("-fno-math-errno",)  # lets sqrt, floor, round... vectorise; results are unchanged


def _dtype_code(t):
    return 1 if t.dtype == torch.int64 else 2 if t.dtype == torch.bool else 0
'''

PARALLEL_MIN = 1 << 15  # elements below which one thread beats starting the team


def _cores() -> int:
    return max(os.cpu_count() or 1, 1)


def _thread_choices() -> list[int]:
    cores = _cores()
    return sorted({1, max(cores // 2, 1), cores})


class CppBackend:
    dsl = "cpp"
    prelude = PRELUDE

    def __init__(self, device: str, precision: str) -> None:
        self.device, self.precision = device, precision

    # ------------------------------------------------------------ configs

    def params(self, kernel: FusedKernel | GemmKernel) -> list[str]:
        """The C function's tuning arguments, in order."""
        if isinstance(kernel, GemmKernel):
            return ["threads", "BLOCK_M", "BLOCK_N", "BLOCK_K"]
        if kernel.is_pointwise() or kernel.inner == 1:
            return ["threads"]
        return ["threads", "WIDTH"]

    def default(self, kernel: FusedKernel | GemmKernel) -> dict[str, Any]:
        if isinstance(kernel, GemmKernel):
            work = kernel.batch * kernel.m * kernel.n * kernel.k
            return {"threads": 1 if work < (1 << 18) else 0, "BLOCK_M": 96,
                    "BLOCK_N": 256, "BLOCK_K": 256}  # fmt: skip
        threads = 1 if kernel.numel < PARALLEL_MIN else 0  # 0: all cores
        if kernel.is_pointwise() or kernel.inner == 1:
            return {"threads": threads}
        return {"threads": threads, "WIDTH": min(cpp_emit.MAX_WIDTH, _pow2_at_least(kernel.inner))}

    def tunables(self, kernel: FusedKernel | GemmKernel) -> dict[str, list[Any]]:
        threads = _thread_choices()
        if isinstance(kernel, GemmKernel):
            return {"threads": threads, "BLOCK_M": [48, 96, 192], "BLOCK_N": [128, 256, 512],
                    "BLOCK_K": [128, 256, 512]}  # fmt: skip
        if kernel.is_pointwise() or kernel.inner == 1:
            return {"threads": threads}
        return {"threads": threads, "WIDTH": [16, 32, 64, 128, 256]}

    # ------------------------------------------------------------ source

    def kernel_source(self, kernel: FusedKernel | GemmKernel, config: dict[str, Any]) -> str:
        if isinstance(kernel, GemmKernel):
            source = cpp_emit.gemm_source(kernel)
        elif kernel.is_pointwise():
            source = cpp_emit.pointwise_source(kernel)
        else:
            source = cpp_emit.row_source(kernel)
        name = kernel.name
        return (
            f'_{name}_src = _HELPERS + r"""\n{source}\n"""\n'
            f'_{name} = build_library(_{name}_src, name="{name}", extra_cflags=_FLAGS)'
        )

    def launch(self, kernel, args: list[str], config: dict[str, Any]) -> list[str]:
        dynamic = _dynamic(kernel)
        n_in = len(kernel.inputs)
        values = list(args[:n_in])
        for name, arg in zip(kernel.outputs, args[n_in:], strict=True):
            values += [arg, f"_dtype_code({arg})"] if name in dynamic else [arg]
        values += [str(int(config[p])) for p in self.params(kernel)]
        return [f"_{kernel.name}.{kernel.name}({', '.join(values)})"]


def _dynamic(kernel: FusedKernel | GemmKernel) -> set[str]:
    if isinstance(kernel, GemmKernel):
        return cpp_emit.dynamic_outputs(kernel.stores)
    return cpp_emit.dynamic_outputs(kernel.stores, cpp_emit.arg_reduction_vars(kernel))


def _pow2_at_least(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()
