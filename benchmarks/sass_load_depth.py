"""Loads in flight: compile a kernel file's Triton kernels for a GPU and read the SASS, no GPU.

A memory-bound loop is fast when enough loads are in flight per SM (Little's law: bandwidth
x latency). ptxas decides how many global loads it issues before their first use, and how many
registers that costs, which sets how many programs share an SM. This script compiles each
`@triton.jit` kernel of a kernel file (such as the builtin writes) for `--arch`, with the
constexprs and `num_warps` of its launch in the file, and prints per kernel:

- registers per thread (ptxas) and bytes spilled, SASS instructions and MUFU (special
  function: exp, reciprocal...) instructions, which an epilogue's transcendentals add; global loads to registers (LDG; cp.async copies to shared
  memory, LDGSTS, as pipelined GEMM loops make, are not counted), and the longest run of
  loads issued back to back before a value is used;
- programs per SM by registers and threads, and loads in flight per SM (that run x threads x
  programs per SM), the figure that tracked the H200's timings (benchmarks/RESULTS.md);
- cp.async copies (LDGSTS) 16 bytes wide and narrower: a GEMM loop whose operand addresses
  lost their alignment copies 4 bytes at a time (a 1x1 convolution ran 1.28x slower so, H100).

Every argument that is not a constexpr is compiled as an fp32 pointer (resident rows' `partials`
as int64; a kernel with scalar arguments is skipped, with the reason); launches are read from
lines `kernel[grid](args, KEY=VALUE, ...)` and `_launch_resident(kernel, ..., dict(KEY=VALUE))`.
The file is parsed, not imported.

    python benchmarks/sass_load_depth.py KERNEL.py [--arch 90]
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REGISTERS_PER_SM, THREADS_PER_SM, PROGRAMS_PER_SM = 65536, 2048, 32
POINTERS = {"partials": "*i64"}  # resident rows' exchange slots (triton_resident.py)


def _launches(tree: ast.Module) -> dict[str, dict]:
    """kernel name -> the keyword arguments of its launch: `name[grid](..., K=V)`, or resident
    rows' `_launch_resident(name, items, chunks, (args), dict(K=V))`."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            name = getattr(node.func.value, "id", None)
            if name:
                found[name] = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_launch_resident":
            options = node.args[4]
            found[node.args[0].id] = {k.arg: ast.literal_eval(k.value) for k in options.keywords}
    return found


def _kernels(source: str) -> dict[str, object]:
    """The file's jit functions, executed from its source without running its module code."""
    tree = ast.parse(source)
    keep = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    keep += [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list]
    module = ast.Module(body=keep, type_ignores=[])
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(ast.unparse(module))  # Triton reads a jit function's source from its file
    namespace: dict = {"__name__": "sass_load_depth_kernels"}
    exec(compile(Path(f.name).read_text(), f.name, "exec"), namespace)  # noqa: S102 - our own file
    return {n.name: namespace[n.name] for n in keep if isinstance(n, ast.FunctionDef)}


def _load_runs(sass: str) -> tuple[int, int]:
    """(global loads, the longest run of loads before any other memory or float op)."""
    ops = re.findall(r"\b(LDG|STG|F[A-Z]+|I[A-Z]+|MUFU|HMMA)\b", sass)
    loads = longest = run = 0
    for op in ops:
        if op == "LDG":
            loads, run = loads + 1, run + 1
            longest = max(longest, run)
        elif not op.startswith("I"):  # integer address arithmetic does not consume a load
            run = 0
    return loads, longest


def measure(fn, launch: dict, arch: int) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    warps = launch.get("num_warps", 4)
    constexprs = {p.name: launch[p.name] for p in fn.params if p.is_constexpr}
    signature = {p.name: "constexpr" if p.is_constexpr else POINTERS.get(p.name, "*fp32")
                 for p in fn.params}  # fmt: skip
    # pointers 16-byte aligned, as Triton specializes a launch on torch's allocations
    aligned = {
        (i,): [["tt.divisibility", 16]] for i, p in enumerate(fn.params) if not p.is_constexpr
    }
    source = ASTSource(fn, signature=signature, constexprs=constexprs, attrs=aligned)
    options = {"num_warps": warps}
    if "num_stages" in launch:
        options["num_stages"] = launch["num_stages"]
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        ptx.write_text(compiled.asm["ptx"])
        target = f"-arch=sm_{arch}a" if arch >= 90 else f"-arch=sm_{arch}"
        done = subprocess.run([str(bin_dir / "ptxas"), target, "-v", str(ptx), "-o", str(cubin)],
                              capture_output=True, text=True, check=True)  # fmt: skip
        sass = subprocess.run([str(bin_dir / "cuobjdump"), "-sass", str(cubin)],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    registers = int(re.search(r"Used (\d+) registers", done.stderr).group(1))
    threads = 32 * warps
    programs = min(REGISTERS_PER_SM // (registers * threads), THREADS_PER_SM // threads,
                   PROGRAMS_PER_SM)  # fmt: skip
    loads, run = _load_runs(sass)
    copies = re.findall(r"\bLDGSTS(?:\.\w+)*", sass)
    spilled = sum(int(n) for n in re.findall(r"(\d+) bytes spill stores", done.stderr))
    return {"registers": registers, "spill_store_bytes": spilled,
            "instructions": len(re.findall(r"^\s+/\*[0-9a-f]{4}\*/", sass, re.M)),
            "mufu": len(re.findall(r"\bMUFU\b", sass)),
            "ldg": loads, "ldg_run": run, "programs_per_sm": programs,
            "loads_in_flight_per_sm": run * threads * programs,
            "async_copies_16B": sum(c.endswith(".128") for c in copies),
            "async_copies_narrow": sum(not c.endswith(".128") for c in copies)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel_file", type=Path)
    parser.add_argument("--arch", type=int, default=90)
    args = parser.parse_args()
    source = args.kernel_file.read_text()
    launches = _launches(ast.parse(source))
    for name, fn in _kernels(source).items():
        if name not in launches:
            continue  # a helper called from kernels, not launched
        try:
            figures = measure(fn, launches[name], args.arch)
        except Exception as error:  # noqa: BLE001 - a scalar argument compiled as a pointer
            figures = {"skipped": f"{type(error).__name__}: {str(error)[:200]}"}
        print(name, launches[name], figures, flush=True)


if __name__ == "__main__":
    sys.exit(main())
