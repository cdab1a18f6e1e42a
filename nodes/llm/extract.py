"""Taking the coder's file out of a model's reply: pure functions, no model, no I/O.

A reply may hold the file in fenced blocks (```python, ```py or bare ```), as bare code with
or without prose around it, or, when there is a current file, as SEARCH/REPLACE edits:

    <<<<<<< SEARCH
    exact lines from the current file
    =======
    replacement lines
    >>>>>>> REPLACE

A reasoning model's `<think>` section is dropped first (`without_reasoning`).
Anything unusable raises `ReplyProblem`, whose `feedback` is what to tell the model when
asking again (the session does that).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Literal

FENCE_OPEN = re.compile(r"^\s*(`{3,})[ \t]*([A-Za-z0-9_+.#-]*)[^`\n]*$")
FENCE_CLOSE = re.compile(r"^\s*(`{3,})[ \t]*$")
PYTHON_LANGS = {"", "python", "py", "python3"}
MODEL_NEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)
CODE_START = re.compile(r"^(import |from \S+ import |class |def |@\w|#!|\"\"\"|''')")
MAX_TRIM = 80  # trailing lines of prose to try dropping after unfenced code

# Reasoning models served without a reasoning parser (DeepSeek-R1, QwQ, Qwen3 on vLLM or
# Ollama) put their thinking, drafts included, in the reply before the answer.
REASONING = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
REASONING_END = re.compile(r"</(?:think|thinking|reasoning)>", re.IGNORECASE)

SEARCH = re.compile(r"^\s*<{5,9}\s*SEARCH\s*$")
DIVIDER = re.compile(r"^\s*={5,9}\s*$")
REPLACE = re.compile(r"^\s*>{5,9}\s*REPLACE\s*$")

WHOLE_FILE = "the complete file, defining class ModelNew, in one ```python block"


class ReplyProblem(ValueError):
    """A reply that cannot be used. `kind` names the problem; `feedback` is for the model."""

    def __init__(self, kind: str, message: str, feedback: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.feedback = feedback


def truncated() -> ReplyProblem:
    return ReplyProblem(
        "truncated",
        "the reply was cut off",
        f"Your reply was cut off; reply with the complete file: {WHOLE_FILE}, and keep any "
        "explanation short.",
    )


def no_model_new() -> ReplyProblem:
    return ReplyProblem(
        "no_model_new",
        "the code does not define class ModelNew",
        "Your code does not define `class ModelNew` (same constructor and forward as `Model`). "
        f"Reply with {WHOLE_FILE}.",
    )


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    closed: bool


@dataclass(frozen=True)
class Edit:
    search: str
    replace: str


def fenced_blocks(text: str) -> list[Block]:
    """Every ``` fenced block, in order; a block still open at the end has closed=False."""
    lines = text.split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE_OPEN.match(lines[i])
        i += 1
        if not opening:
            continue
        ticks, lang = len(opening.group(1)), opening.group(2).lower()
        body: list[str] = []
        closed = False
        while i < len(lines):
            closing = FENCE_CLOSE.match(lines[i])
            i += 1
            if closing and len(closing.group(1)) >= ticks:
                closed = True
                break
            body.append(lines[i - 1])
        blocks.append(Block(lang, "\n".join(body), closed))
    return blocks


def defines_model_new(code: str) -> bool:
    return MODEL_NEW.search(code) is not None


def unfenced_code(text: str) -> str | None:
    """Python code written without fences: from the first line that starts code to the end,
    dropping trailing prose lines while the rest does not parse."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if CODE_START.match(line)), None)
    if start is None:
        return None
    while start > 0 and lines[start - 1].startswith("#"):  # comments just above the code
        start -= 1
    body = lines[start:]
    while body and not body[-1].strip():
        body.pop()
    for end in range(len(body), max(0, len(body) - MAX_TRIM), -1):
        candidate = "\n".join(body[:end])
        try:
            ast.parse(candidate)
        except (SyntaxError, ValueError):
            continue
        return candidate
    return "\n".join(body)  # does not parse: the compiler will say where


def extract_code(text: str, finish_reason: str | None = None) -> str:
    """The full file in a reply; raises ReplyProblem (truncated, no code, no ModelNew)."""
    if finish_reason == "length":
        raise truncated()
    blocks = fenced_blocks(text)
    if any(not b.closed for b in blocks):
        raise truncated()
    if blocks:
        ranked = [b for b in blocks if defines_model_new(b.code)] or [
            b for b in blocks if b.lang in PYTHON_LANGS
        ]
        if not ranked:
            raise _no_code()
        # the longest block; on a tie the later one (a model's final version comes last)
        code = max(enumerate(ranked), key=lambda ib: (len(ib[1].code), ib[0]))[1].code
    else:
        code = unfenced_code(text)
        if code is None:
            raise _no_code()
    if not defines_model_new(code):
        raise no_model_new()
    return code.strip("\n") + "\n"


def _no_code() -> ReplyProblem:
    return ReplyProblem(
        "no_code",
        "no Python code found in the reply",
        f"I found no Python code in your reply. Reply with {WHOLE_FILE}.",
    )


def has_edits(text: str) -> bool:
    return any(SEARCH.match(line) for line in text.split("\n"))


def parse_edits(text: str, finish_reason: str | None = None) -> list[Edit]:
    """The SEARCH/REPLACE blocks of a reply, in order (lines outside them are ignored)."""
    edits: list[Edit] = []
    part: str | None = None  # None outside a block, else "search" or "replace"
    search: list[str] = []
    replace: list[str] = []
    for line in text.split("\n"):
        if part is None:
            if SEARCH.match(line):
                part, search, replace = "search", [], []
        elif part == "search" and DIVIDER.match(line):
            part = "replace"
        elif part == "replace" and REPLACE.match(line):
            edits.append(Edit("\n".join(search), "\n".join(replace)))
            part = None
        elif SEARCH.match(line) or REPLACE.match(line):
            raise _malformed(len(edits) + 1)
        else:
            (search if part == "search" else replace).append(line)
    if finish_reason == "length" or part is not None:  # a block still open: cut off
        raise truncated()
    return edits


def _malformed(n: int) -> ReplyProblem:
    return ReplyProblem(
        "edit_malformed",
        f"edit block {n} is malformed",
        f"Edit block {n} is malformed: each edit is `<<<<<<< SEARCH`, the exact lines to "
        "replace, `=======`, the new lines, `>>>>>>> REPLACE`, each marker on a line of its "
        f"own. Reply with {WHOLE_FILE} instead.",
    )


def _find(lines: list[str], search: list[str], loose: bool) -> list[int]:
    def norm(line: str) -> str:
        return line.rstrip() if loose else line

    want = [norm(s) for s in search]
    n = len(want)
    return [
        i
        for i in range(len(lines) - n + 1)
        if norm(lines[i]) == want[0] and [norm(x) for x in lines[i : i + n]] == want
    ]


def apply_edits(code: str, edits: list[Edit]) -> str:
    """Apply edits in order, each to the result of the previous: an exact match of the SEARCH
    lines first, then one that ignores trailing whitespace. Raises ReplyProblem naming the
    first block that is not found or matches more than one place."""
    lines = code.split("\n")
    for n, edit in enumerate(edits, 1):
        search = edit.search.split("\n")
        if not edit.search.strip():
            raise _edit_failed(n, "its SEARCH part is empty")
        hits = _find(lines, search, loose=False) or _find(lines, search, loose=True)
        if not hits:
            raise _edit_failed(n, "its SEARCH lines are not in the current file")
        if len(hits) > 1:
            where = ", ".join(str(h + 1) for h in hits[:5])
            raise _edit_failed(
                n, f"its SEARCH lines match {len(hits)} places (lines {where}), not one"
            )
        at = hits[0]
        lines[at : at + len(search)] = edit.replace.split("\n") if edit.replace else []
    return "\n".join(lines)


def _edit_failed(n: int, why: str) -> ReplyProblem:
    return ReplyProblem(
        "edit_failed",
        f"edit block {n} did not apply: {why}",
        f"Edit block {n} did not apply: {why}. Do not send edits now: reply with the whole "
        f"file as a rewrite, {WHOLE_FILE}.",
    )


def without_reasoning(text: str) -> str:
    """The reply's answer: reasoning sections removed, a section cut off at the end with them,
    and everything before a closing tag whose opening tag was in the prompt."""
    text = REASONING.sub("", text)
    ends = list(REASONING_END.finditer(text))
    return text[ends[-1].end() :] if ends else text


def code_answer(
    text: str, finish_reason: str | None = None, current_code: str | None = None
) -> tuple[str, Literal["rewrite", "edit"]]:
    """The full new file and how it was written: edits to `current_code`, or a rewrite."""
    text = without_reasoning(text)
    if has_edits(text):
        if current_code is None:
            raise ReplyProblem(
                "edit_without_file",
                "the reply holds edits but there is no current file",
                f"There is no current file to edit. Reply with {WHOLE_FILE}.",
            )
        code = apply_edits(current_code, parse_edits(text, finish_reason))
        if not defines_model_new(code):
            raise no_model_new()
        return code, "edit"
    return extract_code(text, finish_reason), "rewrite"
