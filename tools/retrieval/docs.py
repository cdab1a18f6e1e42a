"""The DSL docs (`prompts/dsl/<dsl>/*.md`) as sections for BM25, indexed once per content."""

from __future__ import annotations

import hashlib
import re

from kernelgraph.state.library import Library

_HEADING = re.compile(r"#{1,6}\s+(.*)")
_ITEM = re.compile(r"(?:[-*+]|\d+[.)])\s")


def doc_sections(text: str) -> list[tuple[str, str]]:
    """A Markdown doc cut into (title, body) sections: at headings, then at blank lines, then a
    bullet list into its items (a paragraph's first lines before the list name its items'
    title). A fenced block stays whole, in its paragraph."""
    sections: list[tuple[str, str]] = []
    heading = ""
    for block in _blocks(text):
        match = _HEADING.fullmatch(block[0])
        if match and len(block) == 1:
            heading = match.group(1).strip()
            continue
        if any(line.lstrip().startswith("```") for line in block) or not any(
            _ITEM.match(line) for line in block
        ):
            sections.append((heading, "\n".join(block)))
            continue
        label: list[str] = []
        items: list[list[str]] = []
        for line in block:
            if _ITEM.match(line):
                items.append([line])
            elif items:
                items[-1].append(line)
            else:
                label.append(line)
        title = " / ".join(t for t in (heading, " ".join(label).rstrip(":")) if t)
        sections += [(title, "\n".join(item)) for item in items]
    return sections


def _blocks(text: str) -> list[list[str]]:
    """Lines grouped at blank lines outside fenced blocks; a heading is a block of its own."""
    blocks: list[list[str]] = [[]]
    fence = False
    for line in text.strip("\n").split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
        if not fence and not line.strip():
            blocks.append([])
        elif not fence and _HEADING.fullmatch(line) and not line.startswith("#!"):
            blocks += [[line], []]
        else:
            blocks[-1].append(line)
    return [b for b in blocks if b]


def ensure_docs(library: Library, dsl: str) -> int:
    """Index the DSL's docs (`prompts/dsl/<dsl>/*.md`) once per content hash; how many files
    were (re)indexed."""
    from kernelgraph import prompts

    folder = prompts.DSL_DIR / dsl
    done = 0
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        text = path.read_text()
        sha = hashlib.sha256(text.encode()).hexdigest()
        key = f"{dsl}/{path.name}"
        if library.doc_sha(key) != sha:
            done += library.index_doc(key, dsl, sha, doc_sections(text))
    return done
