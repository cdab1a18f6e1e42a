"""Rule tables and small AST predicates for the static checks. Standard library only."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelgraph.tools.harness.op_policy import COMPUTE, FREE, HEAVY, classify, method_kind


@dataclass
class Finding:
    rule: str
    message: str
    line: int | None = None


SYNTAX, NO_MODELNEW, IMPORT = "syntax", "no_modelnew", "import"
TORCH_COMPUTE, TORCH_FALLBACK, REFERENCE = "torch_compute", "torch_fallback", "reference_access"
INTROSPECTION, MONKEYPATCH, UNSAFE = "introspection", "monkeypatch", "unsafe"
SIDE_STREAM, NOT_DSL, INIT_REENTRY = "side_stream", "not_dsl", "init_reentry"
RULES = (SYNTAX, NO_MODELNEW, IMPORT, TORCH_COMPUTE, TORCH_FALLBACK, REFERENCE, INTROSPECTION,
         MONKEYPATCH, UNSAFE, SIDE_STREAM, NOT_DSL, INIT_REENTRY)  # fmt: skip
POLICIES = ("strict", "hybrid")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# fmt: off
# Imports are an allow-list; the modules of _MODULE_RULES only get a more specific rule. Those are
# also matched against every component of a resolved name, so `torch.os.system` is caught too.
_COMMON_MODULES = _words("__future__ torch torch.nn torch.nn.functional math typing dataclasses "
                         "functools itertools operator collections collections.abc abc enum "
                         "numbers")
DSL_MODULES = {  # module prefixes each DSL may import on top of the common ones
    "triton": ("triton",), "tilelang": ("tilelang",), "cuda": ("torch.utils.cpp_extension",),
    "cpp": ("torch.utils.cpp_extension", "kernelgraph.tools.dsl.cpp"),
}
_MODULE_RULES = {
    **dict.fromkeys(_words("ctypes subprocess multiprocessing os posix nt importlib socket ssl "
                           "urllib http requests threading _thread concurrent asyncio signal "
                           "pickle marshal shelve shutil pty runpy mmap"), UNSAFE),
    **dict.fromkeys(_words("gc inspect sys builtins traceback types weakref"), INTROSPECTION),
    **dict.fromkeys(_words("io pathlib glob tempfile fileinput linecache"), REFERENCE),
}
_REFERENCE_HINTS = _words("reference ref task tasks problem problems kernelbench harness")
_REFERENCE_NAMES = _words("Model get_inputs get_init_inputs reference ref_model reference_model")
# Resolved dotted names that are never allowed, whatever they are used for.
_PATH_GROUPS = tuple((rule, why, tuple(paths.split())) for rule, why, paths in (
    (SIDE_STREAM, "side streams and CUDA graphs hide work from the timer",
     "torch.Stream torch.cuda.Stream torch.cuda.stream torch.cuda.streams torch.cuda.set_stream "
     "torch.cuda.ExternalStream torch.cuda.StreamContext torch.cuda.graph torch.cuda.graphs "
     "torch.cuda.CUDAGraph torch.cuda.make_graphed_callables torch.cuda.graph_pool_handle"),
    (NOT_DSL, "compiles or dispatches torch ops instead of launching a kernel of the DSL",
     "torch.compile torch.jit torch._dynamo torch._inductor torch.fx torch.export torch.func "
     "torch.vmap torch.ops torch.library torch._ops torch._refs torch._prims torch._decomp "
     "torch._higher_order_ops torch.cuda.jiterator torch.utils._python_dispatch torch.overrides "
     "torch._C"),
    (REFERENCE, "reads or writes files", "torch.load torch.save torch.from_file "
     "torch.UntypedStorage.from_file torch.TypedStorage.from_file"),
    (UNSAFE, "reaches the network or other processes",
     "torch.hub torch.distributed torch.multiprocessing"),
    (INTROSPECTION, "looks attributes up by string", "operator.attrgetter operator.methodcaller"),
))
_FORBIDDEN_ATTRS = _words(
    "f_back f_locals f_globals f_code f_builtins tb_frame tb_next gi_frame gi_code cr_frame "
    "ag_frame __code__ __globals__ __builtins__ __subclasses__ __dict__ __bases__ __base__ __mro__ "
    "__closure__ __class__ __self__ __func__ __wrapped__ __loader__ __spec__ __getattribute__ "
    "__setattr__ __delattr__ __reduce__ __reduce_ex__ __torch_function__ __torch_dispatch__")
_BUILTIN_RULES = {
    **dict.fromkeys(_words("exec eval compile __import__ exit quit breakpoint"), UNSAFE),
    **dict.fromkeys(_words("globals locals vars __builtins__"), INTROSPECTION),
    **dict.fromkeys(_words("open __file__"), REFERENCE),
}
_ATTR_FUNCS = _words("getattr hasattr setattr delattr")
_FILE_METHODS = _words("read_text read_bytes write_text write_bytes")
# torch.* calls are classified like the ATen op of the same name (op_policy), except these helpers
# that run no op; tensor methods use op_policy's deny-list, since the receiver's type is unknown.
_TORCH_HELPERS = _words(
    "tensor as_tensor manual_seed seed is_tensor is_floating_point is_complex get_default_dtype "
    "no_grad inference_mode enable_grad set_grad_enabled is_grad_enabled promote_types "
    "result_type can_cast broadcast_shapes device finfo iinfo get_default_device")
_HOST_METHODS = _words("tolist numpy")  # forward may not compute on the host
_HOST_TENSOR_BUILDERS = _words("torch.tensor torch.as_tensor torch.from_numpy torch.asarray")
_SHARED_METHODS = _words("add sort")  # set.add, list.sort: left to the runtime recorder
_TORCH_FREE_NAMESPACES = _words("cuda backends version utils")  # forbidden parts: _PATH_GROUPS
_NN_HOLDERS = _words("Module Parameter Buffer ParameterList ParameterDict ModuleList ModuleDict "
                     "Identity Flatten Unflatten")
_MODULE_CALLS = _words("forward __call__ _call_impl _conv_forward")
_TORCH_MODULES = _words("torch torch.nn torch.nn.functional torch.linalg torch.special torch.fft")
_DTYPE_PREFIXES = ("float", "bfloat", "int", "uint", "complex", "bool", "half", "double", "long",
                   "short", "cfloat", "cdouble", "qint", "quint")
_TORCH_VALUES = _words("inf nan pi e newaxis strided sparse_coo contiguous_format channels_last "
                       "channels_last_3d preserve_format memory_format layout dtype device")
_KERNEL_DECORATORS = _words("triton.jit triton.autotune triton.heuristics tilelang.jit "
                            "tilelang.lazy_jit tilelang.prim_func tilelang.language.prim_func "
                            "tilelang.language.macro")
_EXT_BUILDERS = _words("torch.utils.cpp_extension.load_inline torch.utils.cpp_extension.load "
                       "kernelgraph.tools.dsl.cpp.build_library tilelang.compile")
_LOOKUP_ERRORS = _words("KeyError IndexError AttributeError LookupError ImportError "
                        "ModuleNotFoundError StopIteration")
_MAIN_EXEMPT = {TORCH_COMPUTE, TORCH_FALLBACK, INIT_REENTRY, REFERENCE}  # never runs on import
# fmt: on


def _nn_kind(cls: str) -> str:
    return (
        HEAVY
        if cls in ("Linear", "LazyLinear") or cls.startswith(("Conv", "LazyConv"))
        else COMPUTE
    )


def _torch_kind(path: str) -> str | None:
    """None (free), HEAVY, COMPUTE, or "module" (constructing a computing nn module)."""
    parts = path.split(".")
    rest = parts[1:]
    if parts[0] != "torch" or not rest or rest[0] in _TORCH_FREE_NAMESPACES:
        return None
    if len(rest) == 1 and rest[0] in _TORCH_HELPERS:
        return None
    if rest[0] == "nn":
        if len(rest) < 2 or rest[1:] == ["functional"]:
            return None
        if rest[1] == "functional":
            return HEAVY if classify(rest[2]) == HEAVY else COMPUTE
        if rest[1][:1].isupper():
            if len(rest) > 2:  # nn.Linear.forward(module, x)
                return COMPUTE if rest[2] in _MODULE_CALLS else None
            return None if rest[1] in _NN_HOLDERS else "module"
        return COMPUTE  # nn.init, nn.utils
    if rest[0] == "Tensor":
        return method_kind(rest[1]) if len(rest) > 1 else None
    if rest[0][:1].isupper():  # torch.Size, torch.Generator, dtypes
        return None
    if len(rest) > 1:  # torch.linalg.*, torch.special.*, torch.autograd.*
        return HEAVY if classify(rest[-1]) == HEAVY else COMPUTE
    kind = classify(rest[0])
    return None if kind == FREE else kind


def _is_value(last: str) -> bool:
    """Whether a torch attribute is a value (dtype, constant, class), not a compute function."""
    return not last[:1].islower() or last.startswith(_DTYPE_PREFIXES) or last in _TORCH_VALUES


def _called(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) in names


def _lit_getattr(node: ast.AST) -> bool:
    """`getattr(obj, "name")`, which is just `obj.name`."""
    return (
        _called(node, "getattr")
        and len(node.args) in (2, 3)
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


def _chain(node: ast.AST) -> list[str] | None:
    """`a.b.c` (or `getattr(a, "b").c`) as ["a", "b", "c"]; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute) or _lit_getattr(node):
        parts.append(node.attr if isinstance(node, ast.Attribute) else node.args[1].value)
        node = node.value if isinstance(node, ast.Attribute) else node.args[0]
    return [node.id, *parts[::-1]] if isinstance(node, ast.Name) else None


def _only_lookup_errors(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Tuple):
        return all(_only_lookup_errors(e) for e in node.elts)
    return isinstance(node, ast.Name) and node.id in _LOOKUP_ERRORS


def _handler_acts(body: list[ast.stmt]) -> bool:
    """Whether an except body calls or returns anything (re-raising is fine)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Call, ast.Return)):
            return True
        if not isinstance(node, ast.Raise):
            stack.extend(ast.iter_child_nodes(node))
    return False
