"""Static anti-cheating checks: realistic candidates pass, each cheat gets its rule."""

from __future__ import annotations

import glob
import textwrap

import pytest

from kernelgraph.tools.harness import native_checks as nc
from kernelgraph.tools.harness import static_checks as sc
from kernelgraph.tools.harness.native_checks import check_native
from kernelgraph.tools.harness.static_checks import Finding, check_python

HEAD = """\
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
"""


def model(forward: str, init: str = "pass", extra: str = "", head: str = HEAD) -> str:
    """A candidate file whose ModelNew has this forward body (and __init__ body)."""
    return (
        head
        + textwrap.dedent(extra)
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args):\n"
        + "        super().__init__()\n"
        + textwrap.indent(textwrap.dedent(init), " " * 8)
        + "\n\n    def forward(self, x, w=None):\n"
        + textwrap.indent(textwrap.dedent(forward), " " * 8)
        + "\n"
    )


TRITON_LINEAR_SOFTMAX = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from triton.language.extra import libdevice
except ImportError:
    from triton.language.extra.cuda import libdevice


@triton.autotune(configs=[triton.Config({"BLOCK_N": 64}, num_warps=4)], key=["N"])
@triton.jit
def linear_softmax_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, K, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + row * K + ks, mask=ks < K, other=0.0)
        w = tl.load(w_ptr + cols[:, None] * K + ks[None, :])
        acc += tl.sum(w * x[None, :], axis=1)
        acc += (w @ x[:, None]).sum(axis=1) * 0  # tensor methods and @ are Triton here
    acc += tl.load(b_ptr + cols)
    acc = acc - acc.max(axis=0)
    num = tl.exp(acc)
    tl.store(y_ptr + row * N + cols, num / tl.sum(num, axis=0), mask=cols < N)


class ModelNew(nn.Module):
    """Owns nn.Linear only for its seeded weights; the kernel does the work."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight_t = self.linear.weight.detach().t().contiguous()  # prep in __init__ is fine

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert isinstance(x, torch.Tensor) and x.dim() == 2
        x = x.contiguous().to(torch.float32)
        M, K = x.shape
        N = self.linear.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 1),)
        linear_softmax_kernel[grid](x, self.linear.weight, self.linear.bias, y, N, K,
                                    BLOCK_K=max(16, triton.next_power_of_2(math.ceil(K / 8))))
        return y.view(M, N)


import math  # noqa: E402


if __name__ == "__main__":
    from reference import Model, get_inputs
    ref = Model(4, 8)
    x, = get_inputs()
    torch.testing.assert_close(ModelNew(4, 8)(x), torch.softmax(ref(x), -1))
'''

CUDA_LOAD_INLINE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
__global__ void softmax_kernel(const float* x, float* y, int n) { /* ... */ }
torch::Tensor softmax(torch::Tensor x) {
    auto y = torch::empty_like(x);
    softmax_kernel<<<x.size(0), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}
"""
cpp_source = "torch::Tensor softmax(torch::Tensor x);"

_ext = load_inline(name="softmax_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["softmax"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline(name="softmax_ext2", cpp_sources=cpp_source,
                               cuda_sources=cuda_source, functions=["softmax"])

    def forward(self, x):
        y = _ext.softmax(x.contiguous())  # an extension function, not Tensor.softmax
        return self.ext.softmax(y)
'''

CPP_BUILD_LIBRARY = r'''
import functools
import torch
import torch.nn as nn
from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""
extern "C" void relu(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = build_library(SOURCE, name="relu")


@functools.lru_cache(maxsize=None)
def _lazy():
    return build_library(SOURCE, name="relu_lazy")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu(x, y, x.numel())
        _lazy().sum(y, y, y.numel())  # a function of the library, not Tensor.sum
        return y
'''

TILELANG_MATMUL = """
import torch
import torch.nn as nn
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, dtype="float16", accum="float"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._kernels = {}

    def forward(self, A, B):
        (M, K), N = A.shape, B.shape[1]
        try:  # a cache lookup: the handler builds a kernel, it does not fall back
            kernel = self._kernels[(M, N, K)]
        except KeyError:
            kernel = self._kernels[(M, N, K)] = matmul(M, N, K)
        return kernel(A, B)
"""

KERNELBENCH_STYLE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_source = """
#include <torch/extension.h>
__global__ void softmax_kernel(const float* x, float* y, int rows, int cols) { /* ... */ }
torch::Tensor softmax(torch::Tensor x) {
    auto y = torch::empty_like(x);
    softmax_kernel<<<x.size(0), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
    return y;
}
"""
softmax_cpp_source = "torch::Tensor softmax(torch::Tensor x);"
softmax = load_inline(name="softmax", cpp_sources=softmax_cpp_source, cuda_sources=softmax_source,
                      functions=["softmax"], verbose=True, extra_cflags=[""], extra_ldflags=[""])


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.softmax = softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.softmax.softmax(x)
'''

PASSING = [
    pytest.param(KERNELBENCH_STYLE, "cuda", "strict", id="kernelbench-style-load-inline"),
    pytest.param(TRITON_LINEAR_SOFTMAX, "triton", "strict", id="triton-linear-softmax"),
    pytest.param(CUDA_LOAD_INLINE, "cuda", "strict", id="cuda-load-inline"),
    pytest.param(CPP_BUILD_LIBRARY, "cpp", "strict", id="cpp-build-library"),
    pytest.param(TILELANG_MATMUL, "tilelang", "strict", id="tilelang-matmul"),
]


@pytest.mark.parametrize("source, dsl, policy", PASSING)
def test_realistic_candidates_pass(source: str, dsl: str, policy: str) -> None:
    assert check_python(source, dsl, policy) == []
    assert check_python(source, dsl, "hybrid") == []
    from kernelgraph.tools.dsl.inline_ext import find_native_sources

    for native in find_native_sources(source) if dsl in ("cuda", "cpp") else []:
        assert check_native(native.code, native.lang, policy) == [], native.origin


@pytest.mark.parametrize("path", sorted(glob.glob("examples/*/kernel_*.py")))
def test_shipped_examples_pass(path: str) -> None:
    dsl = path.rsplit("kernel_", 1)[1].removesuffix(".py")
    with open(path) as f:
        assert check_python(f.read(), dsl, "strict") == []


TRITON = "import triton\nimport triton.language as tl\n"
CASES = [
    # (source, dsl, policy, expected rule or None)
    # --- allowed layout, allocation and weight handling
    (model("return x.view(-1).contiguous().float().reshape(x.shape).clone()"), "cuda", "strict", None),
    (model("return torch.empty(x.shape, dtype=torch.float16, device=x.device)"), "cuda", "strict", None),
    (model("return torch.zeros_like(x).fill_(1.0).t().unsqueeze(0).expand(2, -1, -1)"), "cuda", "strict", None),
    (model("n = x.numel() * x.stride(0) * x.size(1); return x.data_ptr(), n"), "cuda", "strict", None),
    (model("return x", "self.weight = nn.Parameter(torch.randn(4, 4))\n"
           "nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))\n"
           "self.register_buffer('scale', torch.ones(4).sum())"), "cuda", "strict", None),
    (model("return x", "self.conv = nn.Conv2d(3, 8, 3)\nself.wt = self.conv.weight.mean(0)"), "cuda", "strict", None),
    (model("s = torch.cuda.current_stream(); torch.cuda.synchronize(); return x"), "cuda", "strict", None),
    (model("return x.to(torch.bfloat16) if isinstance(x, torch.Tensor) else x"), "cuda", "strict", None),
    (model("return x", extra="def _grid(n: int) -> int:\n    return math.ceil(n / 128)\n"), "cuda", "strict", None),
    (model("return x") + "\nif __name__ == '__main__':\n    print(torch.allclose(ModelNew()(1), Model()(1)))\n", "cuda", "strict", None),
    (model("if x not in self.seen:\n    self.seen.add(x)\nreturn x", "self.seen = set()"), "cuda", "strict", None),
    (model("return x * EPS", extra="EPS = torch.finfo(torch.float32).eps\n"), "cuda", "strict", None),
    (model("return self.libs[0].softmax(x)", "self.libs = {}\nself.libs[0] = build_library('')",
           head=HEAD + "from kernelgraph.tools.dsl.cpp import build_library\n"), "cpp", "strict", None),
    # --- torch compute in the forward path
    (model("return torch.matmul(x, w)"), "cuda", "strict", "torch_compute"),
    (model("return torch.matmul(x, w)"), "cuda", "hybrid", None),
    (model("return torch.softmax(x, -1)"), "cuda", "hybrid", "torch_compute"),
    (model("return torch.relu(x).sum()"), "cuda", "strict", "torch_compute"),
    (model("return F.relu(x)"), "cuda", "strict", "torch_compute"),
    (model("return F.linear(x, w)"), "cuda", "hybrid", None),
    (model("return F.scaled_dot_product_attention(x, x, x)"), "cuda", "strict", "torch_compute"),
    (model("return F.scaled_dot_product_attention(x, x, x)"), "cuda", "hybrid", None),
    (model("return softmax(x, dim=-1)", head=HEAD + "from torch.nn.functional import softmax\n"), "cuda", "strict", "torch_compute"),
    (model("return nnf.gelu(x)", head=HEAD + "from torch.nn import functional as nnf\n"), "cuda", "strict", "torch_compute"),
    (model("return x.sum(dim=1)"), "cuda", "strict", "torch_compute"),
    (model("return x.exp().mean()"), "cuda", "hybrid", "torch_compute"),
    (model("return x.max(dim=0)[0]"), "cuda", "strict", "torch_compute"),
    (model("return x.matmul(w)"), "cuda", "strict", "torch_compute"),
    (model("return x.matmul(w)"), "cuda", "hybrid", None),
    (model("return x @ w"), "cuda", "strict", "torch_compute"),
    (model("return x @ w"), "cuda", "hybrid", None),
    (model("x @= w; return x"), "cuda", "strict", "torch_compute"),
    (model("return torch.cat([x, x])"), "cuda", "strict", "torch_compute"),
    (model("return torch.einsum('ij,jk->ik', x, w)"), "cuda", "hybrid", "torch_compute"),
    (model("return torch.linalg.matmul(x, w)"), "cuda", "hybrid", None),
    (model("return torch.Tensor.matmul(x, w)"), "cuda", "strict", "torch_compute"),
    (model("return getattr(torch, 'relu')(x)"), "cuda", "strict", "torch_compute"),
    (model("return getattr(x, 'sum')()"), "cuda", "strict", "torch_compute"),
    (model("return x.cpu().numpy()"), "cuda", "strict", "torch_compute"),
    (model("return self.fc(x)", "self.fc = nn.Linear(4, 4)"), "cuda", "strict", "torch_compute"),
    (model("return self.fc(x)", "self.fc = nn.Linear(4, 4)"), "cuda", "hybrid", None),
    (model("return self.fc.forward(x)", "self.fc = nn.Linear(4, 4)"), "cuda", "strict", "torch_compute"),
    (model("return self.conv._conv_forward(x, w, None)", "self.conv = nn.Conv2d(3, 3, 3)"), "cuda", "strict", "torch_compute"),
    (model("return self.act(x)", "self.act = nn.ReLU()"), "cuda", "hybrid", "torch_compute"),
    (model("return self.seq(x)", "self.seq = nn.Sequential(nn.Linear(4, 4))"), "cuda", "hybrid", "torch_compute"),
    (model("return nn.Linear(4, 4)(x)"), "cuda", "strict", "torch_compute"),
    (model("layer = nn.LayerNorm(4); return x"), "cuda", "strict", "torch_compute"),
    (model("return mm(x, w)", extra="mm = torch.mm\n"), "cuda", "strict", "torch_compute"),
    (model("return self.f(x)", "self.f = torch.relu"), "cuda", "strict", "torch_compute"),
    (model("return self.f(x)", "self.f = lambda t: torch.relu(t)"), "cuda", "strict", "torch_compute"),
    (model("return self.f(x)", "def f(t):\n    return t.exp()\nself.f = f"), "cuda", "strict", "torch_compute"),
    (model("return self.f(x)", "self.f = functools.partial(F.gelu)", head=HEAD + "import functools\n"), "cuda", "strict", "torch_compute"),
    (model("return _helper(x)", extra="def _helper(t):\n    return torch.exp(t)\n"), "cuda", "strict", "torch_compute"),
    (model("return operator.matmul(x, w)", head=HEAD + "import operator\n"), "cuda", "strict", "torch_compute"),
    (HEAD + "class ModelNew(nn.Linear):\n    def forward(self, x):\n        return super().forward(x)\n", "cuda", "strict", "torch_compute"),
    (HEAD + "class ModelNew(nn.Linear):\n    def forward(self, x):\n        return super().forward(x)\n", "cuda", "hybrid", None),
    # --- falling back to torch
    (model("try:\n    return self.k(x)\nexcept Exception:\n    return torch.relu(x)"), "cuda", "strict", "torch_fallback"),
    (model("try:\n    return self.k(x)\nexcept:\n    return x.clamp(min=0)"), "cuda", "strict", "torch_fallback"),
    (model("try:\n    y = self.k(x)\nexcept RuntimeError:\n    y = self.slow(x)\nreturn y"), "cuda", "strict", "torch_fallback"),
    (model("try:\n    return self.k(x)\nexcept Exception as e:\n    raise RuntimeError(f'kernel failed: {e}') from e"), "cuda", "strict", None),
    (model("return x", "try:\n    self.k = 1\nexcept Exception:\n    self.k = F.relu(torch.ones(1))"), "cuda", "strict", "torch_fallback"),
    # --- reaching the reference
    (model("return Model()(x)"), "cuda", "strict", "reference_access"),
    (model("return x", head=HEAD + "from reference import Model\n"), "cuda", "strict", "reference_access"),
    (model("return x", head=HEAD + "from .task import get_inputs\n"), "cuda", "strict", "reference_access"),
    (model("return x", head=HEAD + "from kernelgraph.tools.harness import reference\n"), "cuda", "strict", "reference_access"),
    (model("return get_init_inputs()"), "cuda", "strict", "reference_access"),
    (model("src = open('task.py').read(); return x"), "cuda", "strict", "reference_access"),
    (model("return open('task.py')", extra="open = open\n"), "cuda", "strict", "reference_access"),
    (model("return x", extra="def get_inputs():\n    return [torch.randn(4)]\n"), "cuda", "strict", None),
    (model("return torch.load('expected.pt')"), "cuda", "strict", "reference_access"),
    (model("return x", head=HEAD + "import pathlib\n"), "cuda", "strict", "reference_access"),
    (model("here = __file__; return x"), "cuda", "strict", "reference_access"),
    (model("text = self.path.read_text(); return x"), "cuda", "strict", "reference_access"),
    # --- introspection and frame tricks
    (model("return x", head=HEAD + "import gc\n"), "cuda", "strict", "introspection"),
    (model("return x", head=HEAD + "import inspect\n"), "cuda", "strict", "introspection"),
    (model("return x", head=HEAD + "import sys\n"), "cuda", "strict", "introspection"),
    (model("return x.__class__.__subclasses__()"), "cuda", "strict", "introspection"),
    (model("return globals()['Model']"), "cuda", "strict", "introspection"),
    (model("return torch.__dict__['matmul'](x, w)"), "cuda", "strict", "introspection"),
    (model("name = 'relu'; return getattr(torch, name)(x)"), "cuda", "strict", "introspection"),
    (model("return self.f.__globals__"), "cuda", "strict", "introspection"),
    (model("return torch.sys.modules"), "cuda", "strict", "introspection"),
    (model("ns = F; return ns"), "cuda", "strict", "introspection"),
    (model("return x", extra="class T(torch.Tensor):\n    @classmethod\n    def __torch_function__(cls, *a):\n        pass\n"), "cuda", "strict", "introspection"),
    (model("return operator.attrgetter('relu')(torch)(x)", head=HEAD + "import operator\n"), "cuda", "strict", "introspection"),
    # --- monkeypatching
    (model("return x", extra="torch.matmul = lambda a, b: a\n"), "cuda", "strict", "monkeypatch"),
    (model("setattr(F, 'relu', lambda t: t); return x"), "cuda", "strict", "monkeypatch"),
    (model("return x", extra="triton.runtime.jit.JITFunction.run = lambda *a, **k: None\n", head=HEAD + TRITON), "triton", "strict", "monkeypatch"),
    (model("torch.backends.cuda.matmul.allow_tf32 = True; return x"), "cuda", "strict", "monkeypatch"),
    # --- escaping the sandbox
    (model("return x", head=HEAD + "import ctypes\n"), "cuda", "strict", "unsafe"),
    (model("return x", head=HEAD + "import subprocess\n"), "cuda", "strict", "unsafe"),
    (model("return x", head=HEAD + "import os\n"), "cuda", "strict", "unsafe"),
    (model("return x", head=HEAD + "from concurrent.futures import ThreadPoolExecutor\n"), "cuda", "strict", "unsafe"),
    (model("return x", head=HEAD + "import pickle\n"), "cuda", "strict", "unsafe"),
    (model("return x", head=HEAD + "import urllib.request\n"), "cuda", "strict", "unsafe"),
    (model("return x", head=HEAD + "import importlib\n"), "cuda", "strict", "unsafe"),
    (model("exec('y = 1'); return x"), "cuda", "strict", "unsafe"),
    (model("return eval('x')"), "cuda", "strict", "unsafe"),
    (model("return __import__('os').system('ls')"), "cuda", "strict", "unsafe"),
    (model("return torch.os.system('ls')"), "cuda", "strict", "unsafe"),
    (model("return torch.multiprocessing.Pool"), "cuda", "strict", "unsafe"),
    # --- side streams and graphs
    (model("s = torch.cuda.Stream(); return x"), "cuda", "strict", "side_stream"),
    (model("with torch.cuda.stream(self.s):\n    return x"), "cuda", "strict", "side_stream"),
    (model("g = torch.cuda.CUDAGraph(); return x"), "cuda", "strict", "side_stream"),
    # --- not a kernel of the DSL
    (model("return torch.compile(lambda t: t)(x)"), "cuda", "strict", "not_dsl"),
    (HEAD + "class ModelNew(nn.Module):\n    @torch.compile\n    def forward(self, x):\n        return x\n", "cuda", "strict", "not_dsl"),
    (model("return torch.jit.script(self)(x)"), "cuda", "strict", "not_dsl"),
    (model("return torch.ops.aten.mm.default(x, w)"), "cuda", "hybrid", "not_dsl"),
    (model("return torch._C._nn.linear(x, w)"), "cuda", "hybrid", "not_dsl"),
    (model("return x", head=HEAD + "import torch._dynamo\n"), "cuda", "strict", "not_dsl"),
    (model("return x", head=HEAD + "from torch.utils._python_dispatch import TorchDispatchMode\n"), "cuda", "strict", "not_dsl"),
    (model("return x", head=HEAD + "from torch.utils.cpp_extension import load_inline\n"), "triton", "strict", "not_dsl"),
    (model("return torch.cuda.jiterator._create_jit_fn('template <typename T> T f(T x) { return x; }')(x)"), "cuda", "strict", "not_dsl"),
    # --- the import allow-list
    (model("return x", head=HEAD + "import numpy as np\n"), "cuda", "strict", "import"),
    (model("return x", head=HEAD + "import json\n"), "cuda", "strict", "import"),
    (model("return x", head=HEAD + "import tilelang\n"), "triton", "strict", "import"),
    (model("return x", head=HEAD + "import triton\n"), "cuda", "strict", "import"),
    (model("return x", head=HEAD + "from kernelgraph.tools.dsl.cpp import build_library\n"), "cuda", "strict", "import"),
    (model("return x", head=HEAD + "from torch.nn.functional import *\n"), "cuda", "strict", "import"),
    # pure-Python helpers that KernelBench's level-3 models import (Swin's to_2tuple)
    (model("return x", head=HEAD + "import collections.abc\nfrom enum import Enum\n"), "cpp", "strict", None),
    # --- re-running __init__ (where torch compute is allowed) from forward
    (model("return ModelNew.__init__(self, x)"), "cuda", "strict", "init_reentry"),
    (model("return type(self)(x).out"), "cuda", "strict", "init_reentry"),
    (model("return ModelNew(x).out"), "cuda", "strict", "init_reentry"),
    (model("self.__init__(x); return self.out"), "cuda", "strict", "init_reentry"),
    # --- structure
    ("def f(:\n    pass\n", "cuda", "strict", "syntax"),
    (HEAD + "class Candidate(nn.Module):\n    def forward(self, x):\n        return x\n", "cuda", "strict", "no_modelnew"),
    (HEAD + "class ModelNew(nn.Module):\n    def run(self, x):\n        return x\n", "cuda", "strict", "no_modelnew"),
]  # fmt: skip


@pytest.mark.parametrize("source, dsl, policy, expected", CASES)
def test_python_rules(source: str, dsl: str, policy: str, expected: str | None) -> None:
    findings = check_python(source, dsl, policy)
    rules = {f.rule for f in findings}
    if expected is None:
        assert findings == [], findings
    else:
        assert expected in rules, findings
        assert rules <= set(sc.RULES)


def test_findings_are_readable() -> None:
    source = model("y = torch.relu(x)\nreturn y")
    (finding,) = check_python(source, "cuda", "strict")
    assert finding == Finding("torch_compute", finding.message, source.splitlines().index(
        "        y = torch.relu(x)") + 1)  # fmt: skip
    assert "torch.relu" in finding.message and "\n" not in finding.message
    assert not finding.message.startswith("line")  # the caller prints the line


def test_syntax_finding_has_line() -> None:
    (finding,) = check_python("x = 1\ndef f(:\n", "triton", "strict")
    assert finding.rule == "syntax" and finding.line == 2


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        check_python("", "cute", "strict")
    with pytest.raises(ValueError):
        check_python("", "triton", "lenient")
    with pytest.raises(ValueError):
        check_native("int x;", "rust", "strict")


# ------------------------------------------------------------------ native (C++/CUDA) sources

CUDA_OK = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/CUDAContext.h>

// x.relu() and torch::matmul in a comment do not count; neither do "torch::matmul(a, b)" strings.
__device__ __forceinline__ float relu(float v) { return fmaxf(v, 0.0f); }

template <typename scalar_t>
__global__ void relu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
    using acc_t = at::acc_type<scalar_t, true>;
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const float big = std::numeric_limits<float>::max() + 1'000'000;
    if (i < n) y[i] = static_cast<scalar_t>(relu(static_cast<acc_t>(x[i])) + big * 0);
    __syncthreads();
    const char* quote = "system(\"rm -rf /\")"; const char c = '\'';
    float s = __shfl_xor_sync(0xffffffff, 1.0f, 16); atomicAdd(y, s * 0.f);
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "expected CUDA; torch::matmul(x) would be cheating");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    auto z = torch::zeros({xc.size(0)}, xc.options().dtype(torch::kFloat32));
    auto w = at::empty({1}, at::TensorOptions().device(at::kCUDA));
    const int64_t n = xc.numel();
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(xc.scalar_type(), "relu", ([&] {
        relu_kernel<scalar_t><<<(n + 255) / 256, 256, 0, stream>>>(
            xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
    }));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    cudaError_t err = cudaGetLastError();
    return y.view({-1}).reshape(x.sizes()).to(x.dtype());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu_forward", &relu_forward, "relu"); }
"""

CPP_OK = r"""
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <omp.h>
const char* raw = R"doc(fopen("x") and x.sum() inside a raw string)doc";

extern "C" void softmax(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float m = -INFINITY, s = 0.f;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, x[r * cols + c]);
        for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = std::exp(x[r * cols + c] - m) / s;
    }
    int thread = omp_get_thread_num();  // a variable named thread is fine
    (void)thread;
}
"""

NATIVE_CASES = [
    (CUDA_OK, "cuda", "strict", None),
    (CPP_OK, "cpp", "strict", None),
    ("auto y = torch::matmul(a, b);", "cuda", "strict", "native_compute"),
    ("auto y = torch::matmul(a, b);", "cuda", "hybrid", None),
    ("auto y = at::mm(a, b);", "cpp", "strict", "native_compute"),
    ("auto y = at::mm(a, b);", "cpp", "hybrid", None),
    ("auto y = at::addmm(c, a, b);", "cuda", "hybrid", None),
    ("auto y = torch::relu(x);", "cuda", "hybrid", "native_compute"),
    ("auto y = x.sum(1);", "cuda", "hybrid", "native_compute"),
    ("auto y = x.add_(z).mul(2);", "cpp", "strict", "native_compute"),
    ("auto y = x.matmul(w);", "cuda", "strict", "native_compute"),
    ("auto y = x.matmul(w);", "cuda", "hybrid", None),
    ("auto y = x->exp();", "cuda", "strict", "native_compute"),
    ("using namespace torch::indexing;\nauto y = x.index({Slice(), 0});", "cuda", "strict", None),
    ("using namespace torch;\nauto y = x;", "cuda", "strict", "native_compute"),
    ("#include <cuda_fp16.h>  // for __half; <dlfcn.h> in a comment is fine\n", "cuda", "strict", None),
    ("auto y = torch::nn::functional::softmax(x, 1);", "cuda", "strict", "native_compute"),
    ("auto y = at::native::add(x, z);", "cuda", "strict", "native_compute"),
    ("using namespace at;\nauto y = relu(x);", "cuda", "strict", "native_compute"),
    ("namespace A = at;\nauto y = A::mm(x, z);", "cuda", "strict", "native_compute"),
    ("auto y = matmul(x, z);  // ADL finds at::matmul", "cuda", "strict", "native_compute"),
    ("auto y = softmax(x, 1);", "cuda", "hybrid", "native_compute"),
    ("auto op = c10::Dispatcher::singleton().findSchemaOrThrow(\"aten::mm\", \"\");", "cuda", "hybrid", "native_compute"),
    ("#include <ATen/native/cuda/block_reduce.cuh>\n", "cuda", "strict", "native_compute"),
    ("cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &a, A, m, B, k, &b, C, m);", "cuda", "strict", "native_library"),
    ("cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &a, A, m, B, k, &b, C, m);", "cuda", "hybrid", None),
    ("cudnnConvolutionForward(h, &a, xd, x, wd, w, cd, algo, ws, n, &b, yd, y);", "cuda", "strict", "native_library"),
    ("at::cuda::blas::gemm<float>('n', 'n', m, n, k, 1.f, a, m, b, k, 0.f, c, m);", "cuda", "strict", "native_library"),
    ("at::cuda::blas::gemm<float>('n', 'n', m, n, k, 1.f, a, m, b, k, 0.f, c, m);", "cuda", "hybrid", None),
    ("thrust::sort(thrust::device, p, p + n);", "cuda", "hybrid", "native_library"),
    ("cub::DeviceReduce::Sum(tmp, bytes, in, out, n);", "cuda", "strict", "native_library"),
    ("system(\"curl http://x\");", "cpp", "strict", "native_unsafe"),
    ("FILE* p = popen(\"ls\", \"r\");", "cpp", "strict", "native_unsafe"),
    ("pid_t p = fork();", "cpp", "strict", "native_unsafe"),
    ("void* h = dlopen(\"libcublas.so\", RTLD_NOW);", "cpp", "strict", "native_unsafe"),
    ("const char* home = std::getenv(\"HOME\");", "cpp", "strict", "native_unsafe"),
    ("std::thread t(work); t.join();", "cpp", "strict", "native_unsafe"),
    ("#include <dlfcn.h>\n", "cpp", "strict", "native_unsafe"),
    ("#include <sys/syscall.h>\n", "cpp", "strict", "native_unsafe"),
    ("#include <sys/mman.h>\nmadvise(p, n, MADV_HUGEPAGE);", "cpp", "strict", None),
    ("#include <sys/mman.h>\nmprotect(p, n, PROT_READ | PROT_WRITE | PROT_EXEC);", "cpp", "strict", "native_unsafe"),
    ("#include <sys/mman.h>\nauto q = mremap(p, n, 2 * n, MREMAP_MAYMOVE);", "cpp", "strict", "native_unsafe"),
    ("#include <sys/mman.h>\nauto q = mmap(0, n, PROT_READ, MAP_SHARED, fd, 0);", "cpp", "strict", "native_file"),
    ("#define CAT(a, b) a##b\nCAT(sys, tem)(\"ls\");", "cpp", "strict", "native_unsafe"),
    ("auto f = py::module_::import(\"torch\").attr(\"matmul\");", "cuda", "hybrid", "native_unsafe"),
    ("PyRun_SimpleString(\"import os\");", "cpp", "strict", "native_unsafe"),
    ("PyObject* f = PyObject_GetAttrString(PyImport_AddModule(\"torch\"), \"mm\");", "cpp", "strict", "native_unsafe"),
    ("PyObject* r = PyObject_Vectorcall(f, args, 2, nullptr);", "cpp", "strict", "native_unsafe"),
    ("#define P(a, b) a##b\nP(Py, Object_Vectorcall)(f, args, 2, nullptr);", "cpp", "strict", "native_unsafe"),
    ("#include <Python.h>\nstatic PyObject* b(PyObject*, PyObject* a) { Py_RETURN_NONE; }", "cpp", "strict", None),
    ("FILE* f = fopen(\"/tmp/ref.pt\", \"rb\");", "cpp", "strict", "native_file"),
    ("std::ifstream in(\"task.py\");", "cpp", "strict", "native_file"),
    ("auto p = std::filesystem::current_path();", "cpp", "strict", "native_file"),
    ("#include \"../task.h\"\n", "cpp", "strict", "native_file"),
    ("auto y = at::_convolution(x, w, b, s, p, d, false, o, 1, false, false, true, true);", "cuda", "strict", "native_compute"),
    ("auto y = at::_convolution(x, w, b, s, p, d, false, o, 1, false, false, true, true);", "cuda", "hybrid", None),
    ("auto y = at::_softmax(x, 1, false);", "cuda", "hybrid", "native_compute"),
    ("auto y = at::_ops::mm::call(a, b);", "cuda", "hybrid", "native_compute"),
    ("auto f = py::getattr(py::module_::import(\"torch\"), \"mm\");", "cuda", "strict", "native_unsafe"),
    ("k<<<g, b, 0, cudaStreamPerThread>>>(p);", "cuda", "strict", "native_side_stream"),
    ("cudaStream_t s; cudaStreamCreate(&s);", "cuda", "strict", "native_side_stream"),
    ("auto s = at::cuda::getStreamFromPool();", "cuda", "hybrid", "native_side_stream"),
    ("cudaGraph_t g; cudaStreamBeginCapture(s, mode);", "cuda", "strict", "native_side_stream"),
    ("", "cuda", "strict", "native_unresolved"),
]  # fmt: skip


@pytest.mark.parametrize("code, lang, policy, expected", NATIVE_CASES)
def test_native_rules(code: str, lang: str, policy: str, expected: str | None) -> None:
    findings = check_native(code, lang, policy)
    if expected is None:
        assert findings == [], findings
    else:
        assert expected in {f.rule for f in findings}, findings
        assert {f.rule for f in findings} <= set(nc.NATIVE_RULES)


def test_native_line_numbers() -> None:
    code = '/* a\n   comment */\nconst char* s = R"(\n)";\nauto y = at::relu(x);\n'
    (finding,) = check_native(code, "cuda", "strict")
    assert (finding.rule, finding.line) == ("native_compute", 5)
    assert "at::relu" in finding.message


def test_native_sources_of_shipped_examples_pass() -> None:
    from kernelgraph.tools.dsl.inline_ext import find_native_sources

    paths = sorted(glob.glob("examples/*/kernel_cpp.py"))
    for path in paths:
        with open(path) as f:
            for source in find_native_sources(f.read()):
                assert check_native(source.code, source.lang, "strict") == [], path


def builder(init: str, forward: str = "return self.body(x)", helper: str = "_make_layer",
            decorator: str = "") -> str:  # fmt: skip
    """A candidate that builds its layers in a helper method, as ResNet's _make_layer does."""
    return HEAD + textwrap.dedent(f"""
        def pair(n):
            return (n, n)


        class ModelNew(nn.Module):
            def __init__(self, *args):
                super().__init__()
                {init}

            {decorator}
            def {helper}(self, n):
                return nn.Sequential(*[nn.Conv2d(n, n, pair(3)[0]) for _ in range(2)])

            def forward(self, x):
                {forward}
        """)  # fmt: skip


@pytest.mark.parametrize(
    "source, expected",
    [
        (builder("self.body = self._make_layer(4)"), None),  # run only while building
        (
            builder("self.body = self._make_layer(4)", "return self._make_layer(4)(x)"),
            "torch_compute",
        ),
        (
            builder(
                "self.make = self._make_layer; self.body = nn.Identity()", "return self.make(4)(x)"
            ),
            "torch_compute",
        ),  # passed around: it may run anywhere
        (
            builder("self.body = (lambda: self._make_layer(4))()"),
            "torch_compute",
        ),  # a lambda runs later
        (builder("self.body = self._make_layer(4)", decorator="@staticmethod"), "torch_compute"),
        (
            builder("self.body = self._call_impl(4)", helper="_call_impl"),
            "torch_compute",
        ),  # torch calls it
        (builder("self.body = nn.Identity()"), "torch_compute"),  # never called while building
        (
            builder(
                "self.layers = self._make_layer(4); self.body = nn.Identity()",
                "return next(self.layers)(x)",
            ).replace("return nn.Sequential", "yield nn.Sequential"),
            "torch_compute",
        ),  # a generator's body runs when forward iterates it
    ],
)
def test_layers_built_in_helpers_that_only_init_calls(source: str, expected: str | None) -> None:
    """KernelBench's level-3 models build layers in helpers (ResNet's _make_layer): those count as
    __init__ when only __init__ (or another such helper) calls them, directly, so the builtin can
    reuse the reference's __init__ and its weights; any other use checks them as run-time code."""
    rules = {f.rule for f in check_python(source, "cpp", "strict")}
    assert (expected in rules) if expected else not rules, rules
