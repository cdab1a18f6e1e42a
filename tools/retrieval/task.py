"""What a task is, for retrieval: its category (level 1) and its signature, the few lines
of words (name, category, ops, stages, shapes, bound) that BM25 matches (level 2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelgraph.state.library import LibraryEntry, device_kind
from kernelgraph.tools.analysis.ops import split_name
from kernelgraph.tools.task_category import category_of, normalize

WEAK_FAMILIES = ("activation", "other")  # decide a category only when nothing else does
NO_COMPUTE_KINDS = ("view", "alloc")


def stage_family(stage: dict[str, Any], ops: Sequence[dict[str, Any]]) -> str:
    """The op family of one stage of the analysis: `category_of` of its composite call (rms_norm,
    cross_entropy), else of its main op (addmm, max_pool2d), else of its kind (pointwise)."""
    anchor = stage.get("anchor")
    main_op = ops[anchor].get("op") if isinstance(anchor, int) and 0 <= anchor < len(ops) else None
    for label in (stage.get("composite"), main_op and split_name(main_op)[1], stage.get("kind")):
        family = category_of(str(label)) if label else "other"
        if family != "other":
            return family
    return "other"


def task_category(analysis: dict[str, Any], task_name: str) -> str:
    """Level 1: the stages' first family that is not a weak one, else the task name's family,
    else the first stage's."""
    ops = analysis.get("ops") or []
    families = [stage_family(s, ops) for s in analysis.get("stages") or [] if isinstance(s, dict)]
    strong = [f for f in families if f not in WEAK_FAMILIES]
    for family in (*strong, category_of(task_name) if task_name else "other", *families):
        if family != "other":
            return family
    return "other"


def _spec(value: Any) -> str:
    """A value of the analysis: "float32[16, 4096]" for a tensor, its repr otherwise."""
    if isinstance(value, dict) and value.get("shape") is not None:
        return f"{value.get('dtype') or '?'}[{', '.join(map(str, value['shape']))}]"
    return str(value.get("value", "?")) if isinstance(value, dict) else str(value)


def unique(items) -> list[str]:
    """The truthy items, in order, once each."""
    return list(dict.fromkeys(i for i in items if i))


def op_names(analysis: dict[str, Any]) -> list[str]:
    """The ATen ops that compute something, by base name, in order, once each."""
    ops = [op for op in analysis.get("ops") or [] if isinstance(op, dict)]
    computing = (op for op in ops if op.get("kind") not in NO_COMPUTE_KINDS)
    return unique(split_name(op.get("op", ""))[1] for op in computing)


def signature_fields(analysis: dict[str, Any], task_name: str, category: str) -> dict[str, str]:
    """A task in a few fields: name, category, ops, stages, shapes, bound (what BM25 matches)."""
    stages = unique(
        f"{s.get('kind', '?')}" + (f" ({s['composite']})" if s.get("composite") else "")
        for s in analysis.get("stages") or []
        if isinstance(s, dict)
    )
    fields = {
        "task": task_name,
        "category": category,
        "ops": " ".join(op_names(analysis)[:24]),
        "stages": ", ".join(stages[:12]),
        "inputs": ", ".join(_spec(v) for v in (analysis.get("inputs") or [])[:8]),
        "outputs": ", ".join(_spec(v) for v in (analysis.get("outputs") or [])[:8]),
        "bound": analysis.get("bound") or "",
    }
    return {key: value for key, value in fields.items() if value}


@dataclass(frozen=True)
class TaskQuery:
    """What a retrieval looks for: the task's words and category, the words of its ops (which a
    kernel of another category must share) and of what it computes (for the docs), the DSL and
    device kind, and the task hashes whose kernels must never be returned."""

    text: str
    category: str = ""  # "": no category tier
    dsl: str | None = None
    device: str | None = None
    exclude: tuple[str, ...] = ()
    ops: str = ""
    topic: str = ""  # what the doc sections are matched with ("": the text)


def describe_task(analysis: dict[str, Any] | None, task_path: str) -> tuple[str, str, str]:
    """(name, category, signature text) of a task from its analysis and path."""
    name = normalize(str(task_path))
    category = task_category(analysis or {}, name)
    fields = signature_fields(analysis or {}, name, category)
    return name, category, "\n".join(f"{key}: {value}" for key, value in fields.items())


def task_query(
    analysis: dict[str, Any] | None,
    task_path: str,
    dsl: str,
    device: str,
    exclude: Sequence[str],
) -> TaskQuery:
    """The query for a task: the values of its signature (not the field names)."""
    name = normalize(str(task_path))
    category = task_category(analysis or {}, name)
    fields = signature_fields(analysis or {}, name, category)
    return TaskQuery(
        text=" ".join(fields.values()),
        category=category,
        dsl=dsl,
        device=device_kind(device),
        exclude=tuple(h for h in exclude if h),
        ops=" ".join(op_names(analysis or {})),
        topic=" ".join(fields.get(key, "") for key in ("task", "category", "ops", "stages")),
    )


def text_query(text: str, dsl: str | None = None, device: str | None = None) -> TaskQuery:
    """A free-text query (`kernelgraph library search`): its category tier is the family its
    words name, if any."""
    family = category_of(text)
    return TaskQuery(text, "" if family == "other" else family, dsl, device and device_kind(device))


def library_entry(
    code: str,
    analysis: dict[str, Any] | None,
    task_path: str,
    task_hash: str,
    source_hash: str,
    **figures: Any,
) -> LibraryEntry:
    """A verified kernel as the library keeps it; `figures` are LibraryEntry's other fields
    (dsl, device, speedup_vs_eager, sol_pct, run_id, ...)."""
    name, category, text = describe_task(analysis, task_path)
    return LibraryEntry(
        code=code,
        task_hash=task_hash,
        source_hash=source_hash,
        task_name=name,
        category=category,
        signature=text,
        **figures,
    )
