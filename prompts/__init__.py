"""Prompt templates and per-DSL documentation (package data).

- `render(step, **context)`: the chat messages of one LLM step. `prompts/<step>.j2` defines
  `{% block system %}` and `{% block user %}`; each block becomes one message. Templates whose
  name starts with "_" are shared pieces (included by the steps), not steps.
- `dsl_docs(dsl)`: `prompts/dsl/<dsl>/`: basics.md, api.md, pitfalls.md, any other .md file,
  then each worked example under `examples/` with a one-line heading. A new DSL's knowledge is a
  new folder; no code changes.
- `hardware_notes(device)`: `prompts/hardware/<arch>.md` for the device the run targets, the
  arch found through the registries below ("" when there are no notes).

Rendering is deterministic (sorted JSON, no clock, no randomness): replay keys hash the text.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
from pathlib import Path
from typing import Any

import jinja2

ROOT = Path(__file__).resolve().parent
DSL_DIR = ROOT / "dsl"
HARDWARE_DIR = ROOT / "hardware"
DOC_ORDER = ("basics.md", "api.md", "pitfalls.md")
ROLES = ("system", "user")

# CUDA compute capability -> notes file. (major, minor) entries win over major-only ones.
GPU_ARCHS: dict[tuple[int, ...], str] = {
    (7,): "volta",
    (7, 5): "turing",
    (8,): "ampere",
    (8, 9): "ada",
    (9,): "hopper",
    (10,): "blackwell",
    (12,): "blackwell",
}
# platform.machine() (lower-cased) -> notes file.
CPU_ARCHS: dict[str, str] = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "aarch64",
    "arm64": "aarch64",
}
# Set to an arch name (e.g. "hopper") to choose the notes without probing the machine, e.g. when
# the graph runs on one host and the kernels are evaluated on another.
ARCH_ENV = "KERNELGRAPH_ARCH"


def _tojson(value: Any, indent: int | None = 2) -> str:
    """JSON for prompts: sorted keys, no HTML escaping (unlike Jinja's own tojson)."""
    return json.dumps(value, sort_keys=True, indent=indent, ensure_ascii=False, default=str)


def _human(value: Any, unit: str = "") -> str:
    """1234567 -> "1.235 M"; small numbers stay as they are."""
    if value is None:
        return "unknown"
    number = float(value)
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(number) >= scale:
            return f"{number / scale:.4g} {prefix}{unit}"
    return f"{number:.4g} {unit}".rstrip()


def _ms(value: Any) -> str:
    """A time in milliseconds, written in us below 0.1 ms."""
    if value is None:
        return "unknown"
    ms = float(value)
    return f"{ms * 1e3:.4g} us" if abs(ms) < 0.1 else f"{ms:.4g} ms"


def _shape(value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _listing(value: Any) -> str:
    """A list as "a, b, c"; anything else as its text."""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _fenced(text: Any, lang: str = "") -> str:
    """`text` in a fenced block whose fence is longer than any run of backticks inside it."""
    body = str(text).strip("\n")
    runs = [len(m) for m in re.findall(r"`{3,}", body)]
    fence = "`" * max([3, *(n + 1 for n in runs)])
    return f"{fence}{lang}\n{body}\n{fence}"


def _quote(text: Any) -> str:
    """Markdown block quote, line by line."""
    return "\n".join(f"> {line}".rstrip() for line in str(text).strip("\n").split("\n"))


def _spec(value: Any) -> str:
    """An analysis value spec: "float32[3, 7]" for a tensor, its repr for anything else."""
    if not isinstance(value, dict):
        return str(value)
    if value.get("shape") is not None:
        text = f"{value.get('dtype') or '?'}{_shape(value.get('shape'))}"
        return f"{value['name']}: {text}" if value.get("name") else text
    return str(value.get("value", "?"))


def _op_line(op: Any) -> str:
    """One op of the analysis: "aten.mean(f32[3,7,1000], [-1], True) [reduction] -> ..."."""
    if not isinstance(op, dict):
        return str(op)
    args = f"({op['args']})" if op.get("args") else ""
    out = f" -> {_spec(op)}" if op.get("shape") is not None else ""
    return f"{op.get('op', '?')}{args} [{op.get('kind', '?')}]{out}"


def _stage_line(stage: Any, ops: Any = ()) -> str:
    """One stage: its kind and its ops, named when they are indices into `ops`."""
    if not isinstance(stage, dict):
        return str(stage)
    ops = list(ops or [])

    def name(ref: Any) -> str:
        if isinstance(ref, int) and 0 <= ref < len(ops) and isinstance(ops[ref], dict):
            return f"[{ref}] {ops[ref].get('op', '?')}"
        return str(ref)

    kind = stage.get("kind", "?")
    if stage.get("composite"):
        kind += f" ({stage['composite']})"
    text = f"{kind}: " + ", ".join(name(r) for r in stage.get("ops") or [])
    if isinstance(stage.get("anchor"), int):
        text += f"; main op {name(stage['anchor'])}"
    if stage.get("shape") is not None:
        text += f"; output {_spec(stage)}"
    return text


def _head(text: Any, lines: int = 60) -> str:
    """The first `lines` lines of a text, with a note of how many were left out."""
    rows = str(text).strip("\n").split("\n")
    if len(rows) <= lines:
        return "\n".join(rows)
    return "\n".join([*rows[:lines], f"... ({len(rows) - lines} more lines)"])


# Store ids are random (c-1a2b3c4d) and run ids carry a date (r-20250101-ab12): neither may
# reach a prompt, whose hash keys replay.
_RUN_ID = re.compile(r"\br-\d{8}-[0-9a-f]{4,}\b")
_CANDIDATE_ID = re.compile(r"\bc-[0-9a-f]{8}\b")
_OTHER_ID = re.compile(r"\b[a-z]-[0-9a-f]{8}\b")


def _scrub(text: Any) -> str:
    """Replace run and store ids in a message by placeholders."""
    text = _RUN_ID.sub("<run>", "" if text is None else str(text))
    text = _CANDIDATE_ID.sub("candidate", text)
    return _OTHER_ID.sub("<id>", text)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROOT)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        tojson=_tojson,
        human=_human,
        ms=_ms,
        shape=_shape,
        listing=_listing,
        fenced=_fenced,
        quote=_quote,
        scrub=_scrub,
        spec=_spec,
        op_line=_op_line,
        stage_line=_stage_line,
        head=_head,
    )
    return env


def steps() -> list[str]:
    """The LLM steps that have a template, sorted."""
    return sorted(p.stem for p in ROOT.glob("*.j2") if not p.name.startswith("_"))


def render(step: str, **context: Any) -> list[dict[str, str]]:
    """The step's chat messages: [{"role": "system", ...}, {"role": "user", ...}].

    A variable the template uses but `context` lacks raises jinja2.UndefinedError.
    """
    known = steps()
    if step not in known:
        raise KeyError(f"unknown prompt step {step!r}; known: {', '.join(known)}")
    template = environment().get_template(f"{step}.j2")
    messages = []
    for role in ROLES:
        if role not in template.blocks:
            raise KeyError(f"prompts/{step}.j2 defines no {{% block {role} %}}")
        text = "".join(template.blocks[role](template.new_context(dict(context))))
        messages.append({"role": role, "content": _tidy(text)})
    return messages


def _tidy(text: str) -> str:
    """Strip trailing spaces and squeeze the runs of blank lines that template tags leave
    behind, outside fenced blocks (code is kept byte for byte)."""
    out: list[str] = []
    fence = ""  # the backticks of the open fenced block
    for line in text.strip("\n").split("\n"):
        marker = re.match(r"\s*(`{3,})", line)
        if fence:
            if marker and line.strip() == marker.group(1) and len(marker.group(1)) >= len(fence):
                fence = ""
        elif marker:
            fence = marker.group(1)
        else:
            line = line.rstrip()
            if not line and (not out or not out[-1]):
                continue
        out.append(line)
    return "\n".join(out).strip() + "\n"


# ---------------------------------------------------------------- DSL docs


def dsl_names() -> list[str]:
    """The DSLs that have a docs folder, sorted."""
    return sorted(p.name for p in DSL_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))


def dsl_docs(dsl: str) -> str:
    """The docs of one DSL, ready to paste into a prompt."""
    folder = DSL_DIR / dsl
    if not folder.is_dir():
        raise KeyError(f"no prompt docs for DSL {dsl!r}; known: {', '.join(dsl_names())}")
    docs = [folder / name for name in DOC_ORDER if (folder / name).is_file()]
    docs += sorted(p for p in folder.glob("*.md") if p.name not in DOC_ORDER)
    parts = [p.read_text().strip() for p in docs]
    for path in example_files(dsl):
        title = example_title(path)
        lang = "python" if path.suffix == ".py" else ""
        parts.append(
            f"## Worked example: {path.name}{' - ' + title if title else ''}\n\n"
            f"```{lang}\n{path.read_text().strip()}\n```"
        )
    return "\n\n".join(parts) + "\n"


def example_files(dsl: str) -> list[Path]:
    folder = DSL_DIR / dsl / "examples"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith((".", "_")))


def example_title(path: Path) -> str:
    """The first line of the example's module docstring (or first comment), else ""."""
    text = path.read_text()
    match = re.match(r'\s*(?:"""|\'\'\'|#|//)\s*(.+)', text)
    return match.group(1).strip().rstrip('"').strip() if match else ""


# ---------------------------------------------------------------- hardware notes


def hardware_arch(device: str) -> str:
    """The notes name for `device` ("cuda", "cuda:1", "cpu"): "hopper", "x86_64", or ""."""
    override = os.environ.get(ARCH_ENV, "").strip()
    if override:
        return override
    kind, _, index = device.partition(":")
    if kind == "cuda":
        capability = _cuda_capability(int(index) if index.isdigit() else 0)
        if capability is None:
            return ""
        return GPU_ARCHS.get(capability, GPU_ARCHS.get(capability[:1], ""))
    if kind == "cpu":
        return CPU_ARCHS.get(platform.machine().lower(), "")
    return ""


def _cuda_capability(index: int) -> tuple[int, int] | None:
    try:
        import torch
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability(index)
    except Exception:  # a broken driver or a bad index: no notes rather than a crash
        return None
    return int(major), int(minor)


def hardware_notes(device: str) -> str:
    """The notes for the device's arch, or "" when there are none."""
    arch = hardware_arch(device)
    if not arch or not re.fullmatch(r"[A-Za-z0-9_.-]+", arch):
        return ""
    path = HARDWARE_DIR / f"{arch}.md"
    return path.read_text().strip() + "\n" if path.is_file() else ""


__all__ = [
    "dsl_docs",
    "dsl_names",
    "environment",
    "example_files",
    "hardware_arch",
    "hardware_notes",
    "render",
    "steps",
]
