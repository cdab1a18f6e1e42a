"""Static token check on a candidate's C++/CUDA sources. Standard library only.

A C++ or CUDA extension can do what a Python candidate may not: call ATen (`at::mm`, `x.sum()`),
call cuBLAS/cuDNN, read files, start processes or side streams, or call back into Python. The
source is tokenised (comments and string literals stripped, `::`-qualified names joined) and the
names are compared with the tables below. Namespaces `torch`/`at` are an allow-list (allocation,
types, constants, CUDA stream/guard helpers); ATen op names are classified like the runtime
recorder's (`op_policy.classify`). Everything else (std::, math, CUDA intrinsics, OpenMP pragmas,
pybind11 `m.def`) passes unless denied by name; of the Python C API, only what a binding module
needs (tools/dsl/cpp_bindings.py) passes.

Line numbers are relative to the source string; the caller adds where the string came from.
"""

from __future__ import annotations

import re

from kernelgraph.tools.dsl.cpp_bindings import BINDING_API_NAMES
from kernelgraph.tools.harness.op_policy import COMPUTE, FREE, HEAVY, classify, method_kind
from kernelgraph.tools.harness.static_checks import Finding

NATIVE_COMPUTE, NATIVE_LIBRARY, NATIVE_UNSAFE = "native_compute", "native_library", "native_unsafe"
NATIVE_FILE, NATIVE_SIDE_STREAM = "native_file", "native_side_stream"
NATIVE_UNRESOLVED = "native_unresolved"
NATIVE_RULES = (NATIVE_COMPUTE, NATIVE_LIBRARY, NATIVE_UNSAFE, NATIVE_FILE, NATIVE_SIDE_STREAM,
                NATIVE_UNRESOLVED)  # fmt: skip
LANGS = ("cpp", "cuda")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# fmt: off
_TORCH_NAMESPACES = _words("torch at aten")
# torch::/at:: names that are not ATen ops but must be usable (lowercase; Types and kConstants
# pass by their spelling).
_TORCH_ALLOWED = _words("from_blob tensor acc_type opmath_type numeric_limits parallel_for "
                        "get_num_threads get_thread_num in_parallel_region irange device_of")
_TORCH_FREE_SUBNS = _words("cuda vec indexing detail")  # stream/guard helpers, SIMD types, Slice
_TORCH_DENY_SUBNS = _words("nn native functional jit autograd linalg special fft _ops")
_DISPATCHER = _words("Dispatcher OperatorHandle findSchema findSchemaOrThrow callBoxed")
_SIDE_STREAM = _words(
    "cudaStreamCreate cudaStreamCreateWithFlags cudaStreamCreateWithPriority getStreamFromPool "
    "getStreamFromExternal setCurrentCUDAStream cudaStreamPerThread cudaGraphCreate "
    "cudaGraphLaunch cudaGraphInstantiate cudaStreamBeginCapture cuStreamCreate "
    "cudaLaunchHostFunc")
_VENDOR_PREFIXES = ("cublas", "cudnn", "cblas_", "mkl_", "dnnl", "mkldnn", "cutlass", "CUBLAS_",
                    "CUDNN_", "Eigen")  # GEMM/conv libraries: heavy, allowed by "hybrid"
_LIBRARY_ALGORITHMS = _words(
    "cub::DeviceReduce cub::DeviceScan cub::DeviceRadixSort cub::DeviceSegmentedReduce "
    "cub::DeviceSegmentedRadixSort cub::DeviceSelect cub::DeviceHistogram")
_UNSAFE = _words(
    "system popen fork vfork execl execle execlp execv execve execvp execvpe posix_spawn dlopen "
    "dlsym getenv setenv putenv socket kill syscall ptrace pthread_create thread jthread async")
_STD_ONLY = _words("thread jthread async")  # too common as plain identifiers to flag unqualified
_FILE = _words("fopen freopen fdopen open openat creat ifstream ofstream fstream filebuf "
               "filesystem opendir mmap mmap64 shm_open memfd_create")
# <sys/mman.h> is allowed for madvise (huge pages for a big output); the rest of it is denied.
_MEMORY_MAP = _words("mprotect pkey_mprotect munmap mremap mlock mlockall remap_file_pages")
_PY_CALLBACK_PREFIXES = ("PyRun_", "PyImport_", "PyObject_Call", "PyEval_", "Py_Compile")
_PY_CALLBACK_NAMES = _words("import eval exec eval_file attr globals getattr")
_PY_C_API = re.compile(r"_?Py(_\w*|[A-Z]\w*)?")  # beyond BINDING_API_NAMES: calls into Python
# Unqualified calls to these names reach ATen through argument-dependent lookup on a Tensor
# argument, unless the source defines a function of that name itself.
_ADL_NAMES = _words(
    "matmul mm bmm addmm baddbmm softmax log_softmax linear conv1d conv2d conv3d convolution "
    "layer_norm batch_norm group_norm instance_norm einsum scaled_dot_product_attention embedding "
    "dropout cross_entropy nll_loss avg_pool2d max_pool2d adaptive_avg_pool2d cumsum cumprod "
    "logsumexp argmax argmin amax amin topk index_select masked_fill gelu silu leaky_relu "
    "hardtanh softplus elu selu mish hardswish hardsigmoid relu sigmoid sum mean cat where")
_KEYWORDS = _words("return else case throw new delete sizeof co_return co_yield do and or not")
_HEADERS = {
    **dict.fromkeys(_words("dlfcn.h unistd.h spawn.h thread pthread.h future csignal signal.h "
                           "netdb.h pybind11/embed.h pybind11/eval.h"), NATIVE_UNSAFE),
    **dict.fromkeys(_words("fstream filesystem fcntl.h"), NATIVE_FILE),
    "torch/script.h": NATIVE_COMPUTE,
}
_ALLOWED_SYS_HEADERS = _words("sys/mman.h")
_HEADER_PREFIXES = (("sys/", NATIVE_UNSAFE), ("netinet/", NATIVE_UNSAFE), ("arpa/", NATIVE_UNSAFE),
                    ("ATen/native/", NATIVE_COMPUTE))
_STRING_PREFIXES = _words("R u8 u U L u8R uR UR LR")
# fmt: on


def _tokenize(code: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(tokens, includes), each as (text, line). Comments and literals are dropped."""
    tokens: list[tuple[str, int]] = []
    includes: list[tuple[str, int]] = []
    i, n, line, line_start = 0, len(code), 1, True
    while i < n:
        c = code[i]
        if c == "\n":
            line, line_start, i = line + 1, True, i + 1
        elif c.isspace() or (c == "\\" and code.startswith("\n", i + 1)):
            line, i = line + (c == "\\"), i + (2 if c == "\\" else 1)
        elif code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line, i = line + code.count("\n", i, j), j
        elif c == "#" and line_start and code[i + 1 :].lstrip(" \t").startswith("include"):
            j = code.find("\n", i)
            j = n if j < 0 else j
            text = code[i:j].split("include", 1)[1].strip()  # <name> or "name" (or a macro)
            close = ">" if text[:1] == "<" else '"'
            includes.append(
                (text[1:].split(close, 1)[0].strip() if text[:1] in '<"' else text, line)
            )
            i = j
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (code[j].isalnum() or code[j] == "_"):
                j += 1
            word, line_start = code[i:j], False
            if j < n and code[j] in "\"'" and word in _STRING_PREFIXES:
                i, line = _skip_literal(code, j, line, raw="R" in word)
            else:
                tokens.append((word, line))
                i = j
        elif c.isdigit() or (c == "." and code[i + 1 : i + 2].isdigit()):
            j = i + 1  # digits, suffixes, exponents and the ' digit separator
            while j < n and (code[j].isalnum() or code[j] in ".'_" or
                             (code[j] in "+-" and code[j - 1] in "eEpP")):  # fmt: skip
                j += 1
            i, line_start = j, False
        elif c in "\"'":
            i, line = _skip_literal(code, i, line, raw=False)
            line_start = False
        else:
            two = code[i : i + 2]
            tok = two if two in ("::", "->", "##") else c
            tokens.append((tok, line))
            i, line_start = i + len(tok), False
    return tokens, includes


def _skip_literal(code: str, i: int, line: int, raw: bool) -> tuple[int, int]:
    """Index after the string/char literal starting at code[i], and the line it ends on."""
    quote = code[i]
    if raw and quote == '"':
        k = code.find("(", i)
        end = code.find(")" + code[i + 1 : k] + '"', k) if k >= 0 else -1
        j = len(code) if end < 0 else end + k - i + 1
        return j, line + code.count("\n", i, j)
    j = i + 1
    while j < len(code) and code[j] != quote and code[j] != "\n":
        j += 2 if code[j] == "\\" else 1
    return j + 1, line + code.count("\n", i, j)


def _names(tokens: list[tuple[str, int]]) -> list[tuple[list[str], str, str, int]]:
    """Qualified names as (parts, previous token, next token, line); `::x` has parts ["", "x"]."""
    out, i = [], 0
    while i < len(tokens):
        text, line = tokens[i]
        if not (text[0].isalpha() or text[0] == "_" or (text == "::" and _is_id(tokens, i + 1))):
            i += 1
            continue
        start, parts = i, []
        if text == "::":
            parts.append("")
            i += 1
        parts.append(tokens[i][0])
        i += 1
        while i + 1 < len(tokens) and tokens[i][0] == "::" and _is_id(tokens, i + 1):
            parts.append(tokens[i + 1][0])
            i += 2
        prev = tokens[start - 1][0] if start else ""
        nxt = tokens[i][0] if i < len(tokens) else ""
        out.append((parts, prev, nxt, line))
    return out


def _is_id(tokens: list[tuple[str, int]], i: int) -> bool:
    return i < len(tokens) and (tokens[i][0][0].isalpha() or tokens[i][0][0] == "_")


def _torch_rule(parts: list[str], aliases: set[str]) -> tuple[str, str, str] | None:
    """(rule, why, kind) for a torch::/at:: name, or None when it is allowed."""
    if parts[0] not in aliases or len(parts) < 2:
        return None
    rest, last = parts[1:], parts[-1]
    kind = classify(last)
    if "blas" in rest[:-1]:  # at::cuda::blas::gemm
        return NATIVE_LIBRARY, "calls a vendor library instead of a kernel", HEAVY
    if _TORCH_DENY_SUBNS.intersection(rest[:-1]):
        return (
            NATIVE_COMPUTE,
            "runs an ATen op instead of the kernel",
            HEAVY if kind == HEAVY else COMPUTE,
        )
    if rest[0] in _TORCH_FREE_SUBNS or last in _TORCH_ALLOWED:
        return None
    if last[:1].isupper() or (last[:1] == "k" and last[1:2].isupper()):
        return None  # types (Tensor, ScalarType, Half) and constants (kFloat, kCUDA)
    return None if kind == FREE else (NATIVE_COMPUTE, "runs an ATen op instead of the kernel", kind)


def check_native(code: str, lang: str, policy: str) -> list[Finding]:
    """Findings for one C++ ("cpp") or CUDA ("cuda") source string under `policy`.

    `lang` is validated only: C++ and CUDA extensions share the same risks and tables.
    """
    if lang not in LANGS or policy not in ("strict", "hybrid"):
        raise ValueError(f"unknown lang {lang!r} or policy {policy!r}")
    if not code.strip():
        return [Finding(NATIVE_UNRESOLVED, "the C++/CUDA source could not be read statically; "
                        "bind it to a string literal at module level")]  # fmt: skip
    hybrid, findings = policy == "hybrid", []

    def add(rule: str, line: int | None, message: str, kind: str = COMPUTE) -> None:
        finding = Finding(rule, message, line)
        if not (hybrid and kind == HEAVY) and finding not in findings:
            findings.append(finding)

    tokens, includes = _tokenize(code)
    for header, line in includes:
        rule = _HEADERS.get(header) or next(
            (r for p, r in _HEADER_PREFIXES if header.startswith(p)), None
        )
        if header in _ALLOWED_SYS_HEADERS:
            rule = None
        if header.startswith("/") or ".." in header:
            rule = NATIVE_FILE
        if rule:
            add(rule, line, f"#include <{header}> is not allowed")
    for text, line in tokens:
        if text == "##":
            add(NATIVE_UNSAFE, line, "token pasting (##) can hide names from this check")
    names = _names(tokens)
    aliases = set(_TORCH_NAMESPACES)
    for k, (parts, prev, _nxt, line) in enumerate(names[1:], 1):
        if prev == "=" and parts[0] in aliases and names[k - 1][1] == "namespace":
            aliases.add(names[k - 1][0][0])  # namespace T = at;
        if prev == "namespace" and names[k - 1][1] == "using" and parts[0] in aliases:
            if parts[1:2] and parts[1] in _TORCH_FREE_SUBNS:
                continue  # using namespace torch::indexing;
            add(NATIVE_COMPUTE, line, f"`using namespace {'::'.join(parts)}` hides ATen calls")
    defined = {p[0] for p, prev, nxt, _ in names if len(p) == 1 and nxt == "("
               and (prev[:1].isalpha() or prev[:1] == "_") and prev not in _KEYWORDS}  # fmt: skip
    for parts, prev, nxt, line in names:
        found = _name_rule(parts, prev, nxt, aliases, defined)
        if found:
            add(found[0], line, found[1], found[2])
    return sorted(findings, key=lambda f: (f.line or 0, f.rule))


def _name_rule(parts, prev, nxt, aliases, defined) -> tuple[str, str, str] | None:
    """(rule, message, kind) for one name occurrence, or None."""
    name, last, called = "::".join(parts), parts[-1], nxt in ("(", "<")
    if prev in (".", "->"):  # a member: tensor methods and pybind's .attr()
        if called and method_kind(last):
            return (
                NATIVE_COMPUTE,
                f".{last}() runs an ATen op instead of the kernel",
                method_kind(last),
            )
        if called and last in _PY_CALLBACK_NAMES:
            return NATIVE_UNSAFE, f".{last}() calls back into Python", COMPUTE
        return None
    found = _torch_rule(parts, aliases)
    if found:
        return found[0], f"{name}: {found[1]}", found[2]
    plain = parts[0] in ("", "std") or len(parts) == 1  # C/C++ library names
    checks = (  # (hit, rule, why, kind)
        (_DISPATCHER.intersection(parts), NATIVE_COMPUTE, "dispatches ATen ops by name", COMPUTE),
        (any(p.startswith(_VENDOR_PREFIXES) for p in parts), NATIVE_LIBRARY,
         "calls a vendor library instead of a kernel", HEAVY),
        (parts[0] == "thrust" or "::".join(parts[:2]) in _LIBRARY_ALGORITHMS, NATIVE_LIBRARY,
         "calls a library algorithm instead of a kernel", COMPUTE),
        (last in _SIDE_STREAM, NATIVE_SIDE_STREAM, "side streams and graphs hide work from the "
         "timer", COMPUTE),
        ((parts[0] in ("py", "pybind11") and last in _PY_CALLBACK_NAMES)
         or last.startswith(_PY_CALLBACK_PREFIXES), NATIVE_UNSAFE, "calls back into Python", COMPUTE),
        (plain and _PY_C_API.fullmatch(last) and last not in BINDING_API_NAMES
         and not last.startswith("PyInit_"), NATIVE_UNSAFE,
         "uses the Python C API beyond binding a function", COMPUTE),
        (plain and last in _UNSAFE and (len(parts) > 1 or (nxt == "(" and last not in _STD_ONLY)),
         NATIVE_UNSAFE, "reaches processes, threads or the environment", COMPUTE),
        (plain and _FILE.intersection(parts) and (len(parts) > 1 or called or last != "open"),
         NATIVE_FILE, "accesses files", COMPUTE),
        (plain and last in _MEMORY_MAP, NATIVE_UNSAFE, "remaps or protects memory", COMPUTE),
        (len(parts) == 1 and nxt == "(" and last in _ADL_NAMES and last not in defined,
         NATIVE_COMPUTE, "on a Tensor argument, finds the ATen op by argument-dependent lookup",
         classify(last)),
    )  # fmt: skip
    for hit, rule, why, kind in checks:
        if hit:
            return rule, f"{name}: {why}", kind
    return None
