"""The four DSL adapters: launch counting, compile checks for explicit targets, native sources.

Runs on a CPU-only machine with g++, nvcc, Triton and TileLang; tests needing a missing tool
skip. Tests that build a torch extension are @slow, tests that launch on a GPU are @gpu.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelgraph.tools.dsl import DslAdapter, LaunchCounter, get_adapter, inline_ext, names
from kernelgraph.tools.dsl.base import import_file
from kernelgraph.tools.dsl.cpp import NativeBuildError, build_library
from kernelgraph.tools.dsl.cuda import nvcc
from kernelgraph.tools.harness.op_policy import violations

REPO = Path(__file__).resolve().parents[1]


def gpu(test):
    """Launches on a CUDA device: marked `gpu`, skipped without one."""
    no_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
    return pytest.mark.gpu(no_gpu(test))


needs_nvcc = pytest.mark.skipif(not Path(nvcc()).exists(), reason="needs nvcc")

TRITON_ADD = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, BODY, mask=mask)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64})],
    key=["n"],
)
@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        n = x.numel()
        total = torch.empty_like(x)
        add_kernel[(triton.cdiv(n, 64),)](x, y, total, n, BLOCK=64)
        out = torch.empty_like(x)
        double_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](total, out, n)
        return out
"""

CPP_KERNELS = r"""
#include <cstdint>
extern "C" void relu(const float* x, float* out, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
}
extern "C" void axpb(const float* x, float* out, int64_t n, double a, double b) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(a * x[i] + b);
}
"""

CPP_RELU = f'''
import torch
import torch.nn as nn
from kernelgraph.tools.dsl.cpp import build_library

SOURCE = r"""{CPP_KERNELS}"""
lib = build_library(SOURCE, name="ops")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        lib.axpb(out, out, out.numel(), 2.0, 1.0)
        return out
'''

CUDA_ADD = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

KERNEL = r"""
__global__ void add_kernel(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + BODY;
}
"""
LAUNCH = r"""
torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto c = torch::empty_like(a);
    int n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
    return c;
}
"""
ext = load_inline(
    "kg_add", cpp_sources="torch::Tensor add(torch::Tensor a, torch::Tensor b);",
    cuda_sources=[KERNEL, LAUNCH], functions=["add"],
)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.add(a, b)
'''

TILELANG_ADD = """
import torch.nn as nn
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1], target=TARGET)
def make_add(N, block=128, dtype="float32"):
    @T.prim_func
    def add(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + BODY
    return add


class ModelNew(nn.Module):
    def forward(self, a, b):
        return make_add(a.numel())(a, b)
"""


@pytest.fixture
def candidate(tmp_path):
    """Writes a candidate file from a template, substituting placeholders."""

    def write(template: str, name: str = "candidate.py", **fields: str) -> Path:
        for key, value in fields.items():
            template = template.replace(key, value)
        path = tmp_path / name
        path.write_text(template)
        return path

    return write


def _triton_patch_points():
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return [(JITFunction, "run"), (InterpretedFunction, "run"), (Autotuner, "_bench")]


def _tilelang_patch_points():
    from tilelang.jit.kernel import JITKernel

    return [(JITKernel, "__call__")]


def _extension_patch_points():
    import torch.utils.cpp_extension as cpp_extension

    return [(cpp_extension, "load_inline"), (cpp_extension, "load"), (inline_ext, "_counter")]


# What each adapter's install_launch_counter replaces, process-wide.
PATCH_POINTS = {
    "triton": _triton_patch_points,
    "tilelang": _tilelang_patch_points,
    "cpp": _extension_patch_points,
    "cuda": _extension_patch_points,
}


@pytest.fixture
def install(monkeypatch):
    """Installs a fresh LaunchCounter for a DSL; the patches are undone after the test."""

    def install(name: str, device: str) -> LaunchCounter:
        for owner, attr in PATCH_POINTS[name]():
            monkeypatch.setattr(owner, attr, getattr(owner, attr))
        counter = LaunchCounter()
        get_adapter(name).install_launch_counter(counter, device)
        return counter

    return install


@pytest.fixture(autouse=True)
def build_cache(tmp_path_factory, monkeypatch):
    """One build cache per test session, not the user's."""
    cache = tmp_path_factory.getbasetemp() / "build-cache"
    monkeypatch.setenv("KERNELGRAPH_BUILD_CACHE", str(cache))
    return cache


# ---------------------------------------------------------------- registry


@pytest.mark.parametrize("name", ["triton", "cpp", "cuda", "tilelang"])
def test_registry_returns_the_named_adapter(name):
    adapter = get_adapter(name)
    assert isinstance(adapter, DslAdapter)
    assert adapter.name == name and adapter.devices
    assert name in names()


def test_unknown_dsl_is_a_key_error_naming_the_known_ones():
    with pytest.raises(KeyError, match="unknown DSL 'cobol'.*triton"):
        get_adapter("cobol")


def test_adapters_import_without_loading_dsl_packages():
    code = (
        "import sys, tools.dsl.triton, tools.dsl.tilelang, tools.dsl.cpp, tools.dsl.cuda\n"
        "print(sorted(m for m in ('triton', 'tilelang', 'tvm') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- triton

COUNT_SCRIPT = """
import json, sys, torch
from torch.utils._python_dispatch import TorchDispatchMode
from kernelgraph.tools.dsl import LaunchCounter, get_adapter
from kernelgraph.tools.dsl.base import import_file

counter = LaunchCounter()
get_adapter("triton").install_launch_counter(counter, "cpu")
model = import_file(sys.argv[1]).ModelNew()
ops = []

class Recorder(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not counter.inside:
            ops.append(str(func))
        return func(*args, **(kwargs or {}))

x, y = torch.randn(100), torch.randn(100)
with Recorder():
    for _ in range(2):
        out = model(x, y)
print(json.dumps({"names": counter.names, "correct": torch.allclose(out, 2 * (x + y)), "ops": ops}))
"""


def test_triton_interpreter_launches_are_counted(candidate):
    path = candidate(TRITON_ADD, BODY="x + tl.load(y_ptr + offs, mask=mask)")
    env = {**os.environ, "PYTHONPATH": str(REPO), **get_adapter("triton").child_env("cpu")}
    proc = subprocess.run(
        [sys.executable, "-c", COUNT_SCRIPT, str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["correct"]
    assert result["names"] == {"add_kernel": 2, "double_kernel": 2}
    # The interpreter's own tensor ops stay recorded (so torch smuggled into a kernel body is
    # seen), and they are all layout ops that the strict policy allows.
    assert result["ops"].count("aten.empty_like.default") == 4
    assert violations(result["ops"], "strict") == []


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_triton_compile_check_builds_cubins_without_a_gpu(candidate, target):
    path = candidate(TRITON_ADD, BODY="x + tl.load(y_ptr + offs, mask=mask)")
    report = get_adapter("triton").compile_check(path, target, [], [torch.randn(64)] * 2)
    assert report.ok, report.message
    assert report.kernels == ["add_kernel", "double_kernel"]
    assert report.artifacts["cubin"] > 0 and report.artifacts["ptx"] > 0


def test_triton_compile_check_reports_the_compiler_message(candidate):
    path = candidate(TRITON_ADD, BODY="tl.exp(x, 3)")
    report = get_adapter("triton").compile_check(path, "sm_90a", [], [torch.randn(64)] * 2)
    assert not report.ok
    assert report.message.startswith("CompilationError")
    assert "tl.exp(x, 3)" in report.message and "tools/dsl" not in report.message


def test_triton_compile_errors_are_recognised():
    from triton.runtime.errors import PTXASError

    adapter = get_adapter("triton")
    assert adapter.is_compile_error(PTXASError("ptxas failed"))
    assert not adapter.is_compile_error(RuntimeError("illegal memory access"))


@pytest.mark.parametrize(
    "device, dtypes, warned",
    [("cpu", {"bfloat16"}, True), ("cpu", {"float32"}, False), ("cuda", {"bfloat16"}, False)],
)
def test_triton_warns_about_bfloat16_in_the_interpreter(device, dtypes, warned):
    assert bool(get_adapter("triton").notes(device, dtypes)) == warned


@pytest.mark.parametrize("device, env", [("cpu", {"TRITON_INTERPRET": "1"}), ("cuda", {})])
def test_triton_child_env(device, env):
    assert get_adapter("triton").child_env(device) == env


@pytest.mark.parametrize("name", ["triton", "cuda", "tilelang"])
def test_malformed_gpu_target_is_reported(candidate, name):
    path = candidate(TRITON_ADD, BODY="x")
    report = get_adapter(name).compile_check(path, "sm_9x", [], [])
    assert not report.ok and "sm_9x" in report.message


@gpu
def test_triton_gpu_launches_are_counted(candidate, install):
    counter = install("triton", "cuda")
    path = candidate(TRITON_ADD, BODY="x + tl.load(y_ptr + offs, mask=mask)")
    x, y = torch.randn(100, device="cuda"), torch.randn(100, device="cuda")
    out = import_file(path).ModelNew()(x, y)
    assert torch.allclose(out, 2 * (x + y))
    assert counter.names == {"add_kernel": 1, "double_kernel": 1}


# ---------------------------------------------------------------- cpp


def test_build_library_runs_converts_arguments_and_counts(candidate, install):
    counter = install("cpp", "cpu")
    model = import_file(candidate(CPP_RELU)).ModelNew()
    x = torch.randn(1000)
    assert torch.allclose(model(x), 2 * x.relu() + 1)
    assert counter.names == {"ops.relu": 1, "ops.axpb": 1}


def test_build_library_reuses_the_cached_build(monkeypatch):
    first = build_library(CPP_KERNELS + "// cache probe\n")

    def no_compiler(*args, **kwargs):
        raise AssertionError("g++ ran for a cached source")

    monkeypatch.setattr(inline_ext.subprocess, "run", no_compiler)
    second = build_library(CPP_KERNELS + "// cache probe\n")
    assert second.path == first.path
    x, out = torch.randn(10), torch.empty(10)
    second.relu(x, out, 10)
    assert torch.equal(out, x.relu())


@pytest.mark.parametrize(
    "args, error",
    [(("x", None, 3), TypeError), ((torch.randn(3), torch.empty(3), 3.5 + 1j), TypeError)],
)
def test_native_library_rejects_unsupported_arguments(args, error):
    lib = build_library(CPP_KERNELS)
    with pytest.raises(error, match="argument"):
        lib.relu(*args)
    with pytest.raises(AttributeError, match="no extern"):
        lib.missing()


def test_cpp_compile_error_carries_gxx_messages(candidate):
    broken = CPP_KERNELS.replace("out[i] = x[i] > 0.f", "out[i] = y[i] > 0.f")
    with pytest.raises(NativeBuildError, match="'y' was not declared") as info:
        build_library(broken)
    assert get_adapter("cpp").is_compile_error(info.value)
    report = get_adapter("cpp").compile_check(candidate(CPP_RELU.replace(CPP_KERNELS, broken)))
    assert not report.ok and "'y' was not declared" in report.message


def test_cpp_compile_check_builds_the_library(candidate):
    report = get_adapter("cpp").compile_check(candidate(CPP_RELU), "cpu")
    assert report.ok, report.message
    assert report.kernels == ["ops"] and report.artifacts["so"] > 0


@pytest.mark.slow
def test_load_inline_extension_calls_are_counted(candidate, install, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    counter = install("cpp", "cpu")
    source = """
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(
    "kg_relu", cpp_sources="torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }",
    functions=["relu"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
"""
    x = torch.randn(100)
    assert torch.equal(import_file(candidate(source)).ModelNew()(x), x.relu())
    assert counter.names == {"kg_relu.relu": 1}


# ---------------------------------------------------------------- native sources

KERNEL_TEXT = "__global__ void k() {}"


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            'lib = build_library("extern \\"C\\" void f() {}", name="f")',
            [("cpp", 'extern "C" void f() {}', "source (line 1)")],
        ),
        (
            f'CUDA = "{KERNEL_TEXT}"\nHEAD = "#include <x>\\n"\n'
            'ext = load_inline("e", ["int f();"], cuda_sources=[HEAD + CUDA, "// two"])',
            [
                ("cpp", "int f();", "cpp_sources (line 3)"),
                ("cuda", f"#include <x>\n{KERNEL_TEXT}\n// two", "cuda_sources (line 3)"),
            ],
        ),
        (
            'def build(n):\n    return load_inline("e", cpp_sources=f"int f{n}();")',
            [("cpp", "", "cpp_sources (line 2), unresolved")],
        ),
        (
            'SRC = "a"\nSRC = "b"\ntorch.utils.cpp_extension.load_inline("e", SRC)',
            [("cpp", "", "cpp_sources (line 3), unresolved")],
        ),
    ],
    ids=["build_library", "load_inline constants", "f-string", "rebound name"],
)
def test_native_sources_are_read_from_the_ast(source, expected):
    found = get_adapter("cpp").native_sources(source)
    assert [(s.lang, s.code, s.origin) for s in found] == expected
    assert get_adapter("cuda").native_sources(source) == found


# ---------------------------------------------------------------- cuda


@needs_nvcc
def test_cuda_compile_check_builds_a_cubin(candidate):
    report = get_adapter("cuda").compile_check(candidate(CUDA_ADD, BODY="b[i]"), "sm_90a")
    assert report.ok, report.message
    assert report.kernels == ["add_kernel"] and report.artifacts["cubin"] > 0


@needs_nvcc
def test_cuda_compile_check_reports_nvcc_errors_at_candidate_lines(candidate):
    report = get_adapter("cuda").compile_check(candidate(CUDA_ADD, BODY="q[i]"), "sm_90a")
    assert not report.ok
    assert 'cuda_sources(4): error: identifier "q" is undefined' in report.message


def test_torch_extension_build_failures_are_compile_errors():
    adapter = get_adapter("cuda")
    assert adapter.is_compile_error(RuntimeError("Error building extension 'kg_add': ..."))
    assert adapter.is_compile_error(NativeBuildError("nvcc failed"))
    assert not adapter.is_compile_error(RuntimeError("CUDA error: illegal memory access"))


@pytest.mark.slow
@gpu
def test_cuda_extension_launches_are_counted(candidate, install):
    counter = install("cuda", "cuda")
    model = import_file(candidate(CUDA_ADD, BODY="b[i]")).ModelNew()
    a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    assert torch.allclose(model(a, b), a + b)
    assert counter.names == {"kg_add.add": 1}


# ---------------------------------------------------------------- tilelang


@pytest.fixture
def tilelang_adapter():
    pytest.importorskip("tilelang")
    return get_adapter("tilelang")


def test_tilelang_compile_check_builds_a_cubin(candidate, tilelang_adapter):
    path = candidate(TILELANG_ADD, TARGET='"cuda"', BODY="B[bx * block + i]")
    report = tilelang_adapter.compile_check(path, "sm_90a", [], [torch.randn(1000)] * 2)
    assert report.ok, report.message
    assert report.kernels == ["add"]
    assert report.artifacts["cubin"] > 0 and report.artifacts["cuda"] > 0


def test_tilelang_compile_check_reports_kernel_errors(candidate, tilelang_adapter):
    path = candidate(TILELANG_ADD, TARGET='"cuda"', BODY="Q[bx * block + i]")
    report = tilelang_adapter.compile_check(path, "sm_90a", [], [torch.randn(1000)] * 2)
    assert not report.ok
    assert report.message == "NameError: name 'Q' is not defined (candidate line 14)"


def test_tilelang_launches_are_counted(candidate, tilelang_adapter, install):
    """Compiled for TileLang's C target, so the kernel really runs on this CPU."""
    counter = install("tilelang", "cuda")
    path = candidate(
        TILELANG_ADD.replace(", threads=block", ""), TARGET='"c"', BODY="B[bx * block + i]"
    )
    a, b = torch.randn(300), torch.randn(300)
    assert torch.allclose(import_file(path).ModelNew()(a, b), a + b)
    assert counter.names == {"add": 1}


def test_tilelang_elaboration_errors_are_compile_errors(candidate, tilelang_adapter):
    path = candidate(TILELANG_ADD, TARGET='"c"', BODY="Q[bx * block + i]")
    with pytest.raises(NameError) as info:
        import_file(path).make_add(64)
    assert tilelang_adapter.is_compile_error(info.value)
    assert not tilelang_adapter.is_compile_error(RuntimeError("launch failed"))


@gpu
def test_tilelang_gpu_launches_are_counted(candidate, tilelang_adapter, install):
    counter = install("tilelang", "cuda")
    path = candidate(TILELANG_ADD, TARGET='"cuda"', BODY="B[bx * block + i]")
    a, b = torch.randn(300, device="cuda"), torch.randn(300, device="cuda")
    assert torch.allclose(import_file(path).ModelNew()(a, b), a + b)
    assert counter.names == {"add": 1}


GRID_STRIDE = """
import torch
import triton
import triton.language as tl


@triton.jit
def grid_stride_copy(x_ptr, out_ptr, n):
    for i in range(tl.program_id(0), n, tl.num_programs(0)):
        tl.store(out_ptr + i, tl.load(x_ptr + i))


x = torch.arange(7.0)
out = torch.empty_like(x)
grid_stride_copy[(3,)](x, out, x.numel())
assert torch.equal(out, x)
"""


@pytest.mark.parametrize("prepared", [True, False])
def test_the_interpreter_takes_runtime_values_as_indices_once_prepared(tmp_path, prepared):
    """numpy >= 2.4 refuses Triton 3.6's interpreter `int()` of a 1-element array (triton#9171);
    older numpy deprecates it, so warnings as errors show the same failure here."""
    pytest.importorskip("triton")
    script = tmp_path / "grid_stride.py"
    prepare = "get_adapter('triton').prepare_child('cpu')\n" if prepared else ""
    script.write_text("from kernelgraph.tools.dsl import get_adapter\n" + prepare + GRID_STRIDE)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", str(script)],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert (proc.returncode == 0) is prepared, proc.stderr[-2000:]
    if not prepared:
        assert "to a scalar" in proc.stderr or "Python scalars" in proc.stderr
