"""Kernel files stand alone: they import torch, their DSL and the standard library, never
kernelgraph (`tools`, `graph`, `nodes`, `state`, `prompts`).

`kernelgraph export` and runs/<run>/best.py hand out a kernel file to run elsewhere, so the
shipped examples, the DSL docs' worked examples and what the builtin model writes must not need
this repository. Each file is imported in an interpreter that cannot import kernelgraph
(builtin_helpers.run_isolated: `python -I -S`, the kernel copied out of the repository), which
must find ModelNew and have loaded no kernelgraph module. A file whose DSL cannot be loaded on
this machine is skipped with the reason; the static import check below covers every file.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from builtin_helpers import KERNELGRAPH_PACKAGES, builtin_generator, run_isolated, task_file

from kernelgraph.tools.dsl.cpp_bindings import binding_module, extern_functions, load_inline_name
from kernelgraph.tools.harness.native_checks import check_native

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_KERNELS = sorted(ROOT.glob("examples/*/kernel_*.py"))
WORKED_EXAMPLES = sorted(ROOT.glob("prompts/dsl/*/examples/*.py"))
KERNEL_FILES = EXAMPLE_KERNELS + WORKED_EXAMPLES
IDS = [str(p.relative_to(ROOT)) for p in KERNEL_FILES]

IMPORT_KERNEL = r"""
import importlib.util
import json
import sys

spec = importlib.util.spec_from_file_location("standalone_kernel", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules["standalone_kernel"] = module  # Triton reads kernel source through the module
spec.loader.exec_module(module)
assert isinstance(getattr(module, "ModelNew", None), type), "no class ModelNew"
packages = set(sys.argv[2].split(","))
loaded = sorted(n for n in sys.modules if n.split(".")[0] in packages)
print(json.dumps({"kernelgraph_modules": loaded}))
"""


def dsl_of(path: Path) -> str:
    if path.parent.name == "examples":  # prompts/dsl/<dsl>/examples/<name>.py
        return path.parent.parent.name
    return path.stem.removeprefix("kernel_")  # examples/<task>/kernel_<dsl>.py


def missing_dsl(dsl: str) -> str | None:
    """Why files of this DSL cannot be imported here, or None."""
    if dsl in ("triton", "tilelang") and importlib.util.find_spec(dsl) is None:
        return f"{dsl} is not installed"
    if dsl in ("cpp", "cuda"):
        for tool in ("g++", "ninja"):
            if shutil.which(tool) is None:
                return f"torch.utils.cpp_extension.load_inline needs {tool}, which is not on PATH"
    if dsl == "cuda" and torch.version.cuda is None:
        return "torch is a CPU build: torch.utils.cpp_extension cannot build CUDA sources"
    if dsl == "cuda" and shutil.which("nvcc") is None:
        return "nvcc is not on PATH"
    return None


def import_isolated(kernel: Path, dsl: str, tmp_path: Path) -> list[str]:
    """Import a copy of the kernel file outside the repository; the kernelgraph modules loaded."""
    copy = tmp_path / "kernel_copy" / kernel.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(kernel, copy)
    script = tmp_path / "import_kernel.py"
    script.write_text(IMPORT_KERNEL)
    env = {"TRITON_INTERPRET": "1"} if dsl == "triton" else {}
    proc = run_isolated(script, str(copy), ",".join(KERNELGRAPH_PACKAGES), cwd=copy.parent, env=env)
    assert proc.returncode == 0, f"{kernel.name} does not import on its own:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])["kernelgraph_modules"]


def kernelgraph_imports(code: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in KERNELGRAPH_PACKAGES]
        elif isinstance(node, ast.ImportFrom) and (node.level or not node.module):
            found.append("." * node.level + (node.module or ""))  # relative: the repository
        elif isinstance(node, ast.ImportFrom) and node.module.split(".")[0] in KERNELGRAPH_PACKAGES:
            found.append(node.module)
    return found


def test_the_checked_files_are_all_there():
    dsls = {dsl_of(p) for p in EXAMPLE_KERNELS}
    assert len(EXAMPLE_KERNELS) >= 14 and {"triton", "cpp", "cuda", "tilelang"} <= dsls
    assert {dsl_of(p) for p in WORKED_EXAMPLES} == {"triton", "cpp", "cuda", "tilelang"}


@pytest.mark.parametrize("kernel", KERNEL_FILES, ids=IDS)
def test_kernel_files_import_no_kernelgraph_module(kernel):
    assert kernelgraph_imports(kernel.read_text()) == []


@pytest.mark.parametrize("kernel", KERNEL_FILES, ids=IDS)
def test_kernel_files_import_in_a_clean_interpreter(kernel, tmp_path):
    dsl = dsl_of(kernel)
    reason = missing_dsl(dsl)
    if reason:
        pytest.skip(f"cannot import a {dsl} kernel here: {reason}")
    assert import_isolated(kernel, dsl, tmp_path) == []


CPP_KERNELS = [p for p in KERNEL_FILES if dsl_of(p) == "cpp"]


@pytest.mark.parametrize("kernel", CPP_KERNELS, ids=[str(p.relative_to(ROOT)) for p in CPP_KERNELS])
def test_cpp_bindings_are_written_from_the_source(kernel):
    """Hand-written C++ kernels carry the bindings tools/dsl/cpp_bindings.py writes from their
    SOURCE (refresh: python -m kernelgraph.tools.dsl.cpp_bindings FILE)."""
    literals = {
        stmt.targets[0].id: stmt.value.value
        for stmt in ast.parse(kernel.read_text()).body
        if isinstance(stmt, ast.Assign)
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Constant)
    }
    name = load_inline_name(ast.parse(kernel.read_text()))
    expected = "\n" + binding_module([literals["SOURCE"]], name, declare=False)
    assert literals["BINDINGS"] == expected, (
        f"run: python -m kernelgraph.tools.dsl.cpp_bindings {kernel}"
    )


@pytest.mark.parametrize("dsl", ["cpp", "triton"])
def test_builtin_kernels_stand_alone(dsl, tmp_path):
    reason = missing_dsl(dsl)
    if reason:
        pytest.skip(f"cannot import a {dsl} kernel here: {reason}")
    task = task_file(
        tmp_path,
        "torch.relu(self.fc(x)) * self.scale + torch.softmax(x, dim=-1).sum(dim=-1, keepdim=True)",
        "torch.randn(5, 12)",
        params="self.fc = nn.Linear(12, 8); self.scale = nn.Parameter(torch.randn(8))",
    )
    kernel = tmp_path / f"kernel_{dsl}.py"
    kernel.write_text(builtin_generator(task, dsl, tmp_path).code())
    assert kernelgraph_imports(kernel.read_text()) == []
    assert import_isolated(kernel, dsl, tmp_path) == []
    if dsl == "cpp":  # a second import finds torch's cached build and does not recompile
        name = re.search(r"load_inline\(\s*'(\w+)'", kernel.read_text()).group(1)
        build = Path(os.environ["TORCH_EXTENSIONS_DIR"]) / name
        built = {so: so.stat().st_mtime_ns for so in build.glob("*.so")}
        assert built, f"no build in {build}"
        assert import_isolated(kernel, dsl, tmp_path) == []
        assert {so: so.stat().st_mtime_ns for so in build.glob("*.so")} == built


def test_bindings_follow_the_declared_types():
    source = """
    // extern "C" void commented_out(float* x) {}
    extern "C" void f(const float* __restrict__ x, float *y, void* out, int64_t n, double s,
                      float t, int flag) {
    }
    extern "C" void g(void) {}
    """
    f, g = extern_functions(source)
    assert [(p.name, p.ctype, p.python_type) for p in f.params] == [
        ("x", "const float*", "uintptr_t"),
        ("y", "float*", "uintptr_t"),
        ("out", "void*", "uintptr_t"),
        ("n", "int64_t", "int64_t"),
        ("s", "double", "double"),
        ("t", "float", "double"),
        ("flag", "int", "int64_t"),
    ]
    assert g.name == "g" and g.params == ()
    code = binding_module([source], "kg_probe")
    assert 'extern "C" void f(const float* x, float* y, void* out, int64_t n' in code
    assert 'PyArg_ParseTuple(kg_args, "KKKLddL", &x, &y, &out, &n, &s, &t, &flag)' in code
    assert "f(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y)" in code
    assert '{"g", kg_bind_g, METH_VARARGS, nullptr}' in code and "commented_out" not in code
    assert check_native(code, "cpp", "strict") == []  # the bindings pass the harness's checks
    with pytest.raises(ValueError, match="defined twice"):
        binding_module([source, source], "kg_probe")
    with pytest.raises(ValueError, match="cannot bind the parameter"):
        extern_functions('extern "C" void h(float x[]) {}')


def test_bindings_convert_each_argument_to_its_declared_type(tmp_path, monkeypatch):
    """A built binding module: addresses, ints, bools and floats reach the C function as declared."""
    from torch.utils.cpp_extension import load_inline

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    source = """
    #include <cstdint>
    extern "C" void record(double* out, int64_t n, bool flag, float f, double d) {
        out[0] = n; out[1] = flag; out[2] = f; out[3] = d;
    }
    """
    lib = load_inline(
        "kg_binding_probe", cpp_sources=[source, binding_module([source], "kg_binding_probe", declare=False)],
        no_implicit_headers=True,
    )  # fmt: skip
    out = torch.zeros(4, dtype=torch.float64)
    lib.record(out.data_ptr(), -(2**40), True, 1, 0.25)
    assert out.tolist() == [-(2**40), 1.0, 1.0, 0.25]
    with pytest.raises(TypeError):
        lib.record(out.data_ptr(), 1.5, True, 1.0, 1.0)  # a float for an int64_t
