"""Tracing a model's forward: the ATen ops it runs (with data flow) and its torch.fx graph.

Torch and the standard library only. Runs task code: call it in a sandboxed worker only
(tools/analysis/worker.py), or on models of our own (tests).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from kernelgraph.tools.analysis import ops as op_table
from kernelgraph.tools.analysis.scalars import ScalarValues, plain_number
from kernelgraph.tools.analysis.stages import resolve
from kernelgraph.tools.dispatch_modes import PlainDispatchMode

MAX_OPS = 4000  # ops beyond this are counted, not listed (a Python loop of many small ops)
MAX_ARGS_CHARS = 160
MAX_FX_CHARS = 20000

_SHORT_DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "b8",
    torch.complex64: "c64",
    torch.complex128: "c128",
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tensor_text(t: torch.Tensor) -> str:
    """ "f32[4096,1024]" """
    dims = ",".join(str(int(s)) for s in t.shape)
    return f"{_SHORT_DTYPES.get(t.dtype, dtype_name(t.dtype))}[{dims}]"


def short_repr(value: Any, limit: int = 200) -> str:
    if isinstance(value, torch.Tensor):
        return tensor_text(value)
    if isinstance(value, list | tuple) and any(isinstance(v, torch.Tensor) for v in value):
        inner = ", ".join(short_repr(v, limit) for v in value)
        text = f"[{inner}]" if isinstance(value, list) else f"({inner})"
    else:
        try:
            text = repr(value)
        except Exception as exc:  # noqa: BLE001 - a user object whose repr raises
            text = f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_value(value: Any) -> dict[str, Any]:
    """{"shape", "dtype"} for a tensor, {"value": repr} for anything else."""
    if isinstance(value, torch.Tensor):
        return {"shape": [int(s) for s in value.shape], "dtype": dtype_name(value.dtype)}
    return {"value": short_repr(value)}


def args_text(args: tuple, kwargs: dict) -> str:
    parts = [short_repr(a, 60) for a in args]
    parts += [f"{k}={short_repr(v, 60)}" for k, v in kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= MAX_ARGS_CHARS else text[: MAX_ARGS_CHARS - 3] + "..."


class OpRecorder(PlainDispatchMode):
    """Lists every ATen op the forward runs: name, kind, first output's shape and dtype, a short
    text of its arguments, the data it reads (labels), its FLOPs (torch's flop registry), and the
    composite torch function (if any) it ran inside.

    Data-flow labels: "in:N" (forward input N), "param:NAME", "buffer:NAME", "op:K" (output of
    op K), "const" (any other tensor, e.g. one kept as a plain attribute).

    `values` maps one-element tensors made from a Python number to that number (ScalarValues):
    their refs carry it, so the builtin writes them as scalar literals.
    """

    def __init__(self, limit: int = MAX_OPS, values: WeakIdKeyDictionary | None = None) -> None:
        super().__init__()
        self.limit = limit
        self.values = values if values is not None else WeakIdKeyDictionary()
        self.ops: list[dict[str, Any]] = []
        self.count = 0
        self.labels = WeakIdKeyDictionary()
        self.slots = WeakIdKeyDictionary()  # tensor -> output position of the op that made it
        self.state_of = WeakIdKeyDictionary()  # parameter or buffer -> its label, once updated
        self.group: tuple[int, str, str] | None = None  # (id, function name, kind)

    def name(self, tensors: dict[str, torch.Tensor]) -> None:
        """Label tensors before the forward; a tensor passed twice keeps its first label."""
        for label, tensor in tensors.items():
            if isinstance(tensor, torch.Tensor) and tensor not in self.labels:
                self.labels[tensor] = label

    def label(self, value: Any) -> str:
        return self.labels.get(value, "const") if isinstance(value, torch.Tensor) else "const"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if op_table.is_inplace(str(func)) and args and isinstance(args[0], torch.Tensor):
            self.values.pop(args[0], None)  # its number no longer holds
        index, self.count = self.count, self.count + 1
        if index >= self.limit:
            return out
        tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        outputs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        namespace, base, overload = op_table.split_name(str(func))
        reads = [self.label(t) for t in tensors]
        first = outputs[0] if outputs else None
        entry: dict[str, Any] = {
            "op": f"{namespace}.{base}",
            "overload": overload,
            "kind": op_table.classify(str(func)),
            "shape": [int(s) for s in first.shape] if first is not None else None,
            "dtype": dtype_name(first.dtype) if first is not None else None,
            "args": args_text(args, kwargs),
            "reads": reads,
            "arg_shapes": [[int(s) for s in t.shape] for t in tensors],
            "flops": _op_flops(func, args, kwargs, out),
            "argv": [self.encode(a) for a in args],
            "kwargv": {k: self.encode(v) for k, v in kwargs.items()},
            "outs": [describe_value(o) for o in outputs],
        }
        if self.group is not None:
            entry["group"], entry["composite"], entry["composite_kind"] = self.group
        if op_table.is_inplace(str(func)) and reads:
            # An update of module state (BatchNorm's num_batches_tracked += 1), also when an
            # earlier in-place op already relabelled it (buf.mul_(0.9).add_(x)).
            target = reads[0] if reads[0].startswith(("param:", "buffer:")) else None
            target = target or self.state_of.get(tensors[0])
            if target is not None:
                entry["state"], entry["target"] = True, target
                self.state_of[tensors[0]] = target
        self.ops.append(entry)
        for slot, tensor in enumerate(outputs):
            self.labels[tensor] = f"op:{index}"
            self.slots[tensor] = slot
        return out

    def encode(self, value: Any) -> Any:
        """A JSON form of one op argument: tensors as {"t": label, "o": output position} (and
        "v": the number held by a one-element constant, see `scalar`), dtypes as {"dtype": name},
        numbers, strings and None as they are, lists as lists. The builtin model rebuilds the
        computation from these."""
        if isinstance(value, torch.Tensor):
            ref = {"t": self.label(value), "o": self.slots.get(value, 0)}
            number = self.scalar(value)
            return ref if number is None else {**ref, "v": number}
        if isinstance(value, bool | int | str) or value is None:
            return value
        if isinstance(value, float):
            return value if value == value and abs(value) != float("inf") else {"f": repr(value)}
        if isinstance(value, list | tuple):
            return [self.encode(v) for v in value]
        if isinstance(value, torch.dtype):
            return {"dtype": dtype_name(value)}
        return {"other": short_repr(value, 80)}

    def scalar(self, t: torch.Tensor) -> bool | int | float | None:
        """The finite number a one-element constant holds: one made from a Python number
        (torch.tensor(c): known on meta tensors too), or an unlabelled real tensor's item()."""
        label = self.label(t)
        if label.startswith(("in:", "param:", "buffer:")):
            return None  # the model's own state: the builtin reads it as a tensor
        if t in self.values:
            return self.values[t]
        if label != "const" or t.numel() != 1 or t.is_meta or t.is_complex():
            return None
        return plain_number(t.item())


def _op_flops(func, args, kwargs, out) -> int:
    from torch.utils.flop_counter import flop_registry

    counter = flop_registry.get(getattr(func, "_overloadpacket", None))
    if counter is None:
        return 0
    try:
        return int(counter(*args, **kwargs, out_val=out))
    except Exception:  # noqa: BLE001 - a FLOP formula that does not fit these arguments
        return 0


class CompositeMode(TorchFunctionMode):
    """Marks the ATen ops run inside an outermost call of an ops.COMPOSITES function."""

    def __init__(self, recorder: OpRecorder) -> None:
        super().__init__()
        self.recorder = recorder
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        kind = op_table.COMPOSITES.get(name)
        if kind is None or self.recorder.group is not None:
            return func(*args, **kwargs)
        self.calls += 1
        self.recorder.group = (self.calls, name, kind)
        try:
            return func(*args, **kwargs)
        finally:
            self.recorder.group = None


class StayOnMeta(TorchFunctionMode):
    """Keeps a meta run on meta: `.cuda()`, `.cpu()`, `.to(device)` and factory calls with an
    explicit `device=` (which would override torch.device("meta")) stay on the meta device, so
    a task written for a GPU is analysed anywhere. Dtype conversions still happen."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        receiver = args[0] if args else None
        if isinstance(receiver, torch.Tensor) and receiver.is_meta:
            if name in ("cuda", "cpu"):
                return receiver
            if name == "to":
                _, dtype, _, _ = torch._C._nn._parse_to(*args[1:], **kwargs)
                return receiver if dtype is None else func(receiver, dtype)
        if kwargs.get("device") is not None:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


def module_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    labels: dict[str, torch.Tensor] = {}
    for name, param in model.named_parameters():
        labels[f"param:{name}"] = param
    for name, buffer in model.named_buffers():
        labels[f"buffer:{name}"] = buffer
    return labels


def record_ops(
    model: torch.nn.Module, inputs: list[Any], values: WeakIdKeyDictionary | None = None
) -> tuple[list[dict], list[Any], dict]:
    """Run the forward once under the recorder (no_grad). Returns (ops, outputs, info) where
    info holds "ops_total" and "output_sources" (a data-flow label per output). `values`: the
    numbers ScalarValues saw while the model was built (a constant kept as an attribute)."""
    recorder = OpRecorder(values=values)
    recorder.name(module_tensors(model))
    recorder.name({f"in:{i}": x for i, x in enumerate(inputs)})
    with torch.no_grad(), ScalarValues(recorder.values), CompositeMode(recorder), recorder:
        output = model(*inputs)
    outputs = list(output) if isinstance(output, list | tuple) else [output]
    sources = [resolve(recorder.label(o), recorder.ops) for o in outputs]
    refs = [recorder.encode(o) for o in outputs]
    info = {"ops_total": recorder.count, "output_sources": sources, "output_refs": refs}
    return recorder.ops, outputs, info


# ---------------------------------------------------------------- torch.fx


def fx_graph_text(model: torch.nn.Module, inputs: list[Any]) -> tuple[str | None, str | None]:
    """A readable torch.fx graph of the model, with shapes where they propagate: (text, error).

    Non-tensor forward arguments are traced as constants. symbolic_trace fails on control flow
    that depends on tensor values: then (None, why).
    """
    import torch.fx

    try:
        concrete = _concrete_args(model, inputs)
        graph_module = torch.fx.symbolic_trace(model, concrete_args=concrete or None)
    except Exception as exc:  # noqa: BLE001 - data-dependent control flow, untraceable calls
        return None, f"{type(exc).__name__}: {_first_line(exc)}"
    shapes = True
    try:
        from torch.fx.passes.shape_prop import ShapeProp

        with torch.no_grad():
            ShapeProp(graph_module).propagate(*inputs)
    except Exception:  # noqa: BLE001 - the graph is still worth showing without shapes
        shapes = False
    lines = []
    for node in graph_module.graph.nodes:
        lines.append(_node_line(graph_module, node, shapes))
    text = "\n".join(lines)
    if len(text) > MAX_FX_CHARS:
        text = text[:MAX_FX_CHARS] + f"\n... ({len(lines)} nodes in all)"
    return text, None


def _concrete_args(model: torch.nn.Module, inputs: list[Any]) -> dict[str, Any]:
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return {}
    concrete = {}
    for param, value in zip(params, inputs, strict=False):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            break
        if not isinstance(value, torch.Tensor):
            concrete[param.name] = value
    return concrete


def _node_line(graph_module, node, shapes: bool) -> str:
    meta = _meta_text(node.meta.get("tensor_meta")) if shapes else ""
    head = f"%{node.name}" + (f": {meta}" if meta else "")
    if node.op == "placeholder":
        return f"{head} = input {node.target}"
    if node.op == "output":
        return f"return {_arg_text(node.args[0])}"
    if node.op == "get_attr":
        return f"{head} = self.{node.target}"
    args = ", ".join(
        [_arg_text(a) for a in node.args] + [f"{k}={_arg_text(v)}" for k, v in node.kwargs.items()]
    )
    if node.op == "call_module":
        line = f"{head} = self.{node.target}({args})"
        try:
            described = repr(graph_module.get_submodule(node.target)).replace("\n", " ")
        except Exception:  # noqa: BLE001
            described = ""
        return f"{line}  # {' '.join(described.split())[:120]}" if described else line
    if node.op == "call_method":
        receiver, *rest = [_arg_text(a) for a in node.args]
        rest += [f"{k}={_arg_text(v)}" for k, v in node.kwargs.items()]
        return f"{head} = {receiver}.{node.target}({', '.join(rest)})"
    return f"{head} = {_target_text(node.target)}({args})"


def _target_text(target: Any) -> str:
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if name is None:
        return str(target)
    if name.startswith(("_VariableFunctionsClass.", "_TensorBase.", "TensorBase.")):
        return f"torch.{name.split('.', 1)[1]}"
    module = {"torch._C._nn": "torch.nn.functional", "torch._C._VariableFunctions": "torch"}.get(
        module, module
    )
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    return f"{module}.{name}" if module else name


def _arg_text(value: Any) -> str:
    import torch.fx

    if isinstance(value, torch.fx.Node):
        return f"%{value.name}"
    if isinstance(value, tuple | list):
        inner = ", ".join(_arg_text(v) for v in value)
        if isinstance(value, tuple):
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_arg_text(v)}" for k, v in value.items()) + "}"
    return short_repr(value, 80)


def _meta_text(meta: Any) -> str:
    if meta is None:
        return ""
    if hasattr(meta, "shape") and hasattr(meta, "dtype"):
        dims = ",".join(str(int(s)) for s in meta.shape)
        return f"{_SHORT_DTYPES.get(meta.dtype, dtype_name(meta.dtype))}[{dims}]"
    if isinstance(meta, tuple | list):
        parts = [_meta_text(m) for m in meta]
        return "(" + ", ".join(p or "?" for p in parts) + ")"
    return ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
