"""Which problems a bench runs: the task files of a suite folder, filtered by `--only` globs.

A suite is a KernelBench checkout (its `KernelBench/levelN` folders), a folder of `levelN`
folders, one level folder, or any folder of task files (`NAME.py` or `NAME/task.py`). Problems
in a level folder are named `levelN/STEM`, so names stay unique across levels.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from kernelgraph.state.bench import BenchProblem
from kernelgraph.tools.harness.verdict import UsageError
from kernelgraph.tools.task_category import category_of

LEVEL = re.compile(r"^level\d+$")


def level_folders(suite: Path) -> list[Path]:
    """The level folders of a KernelBench checkout or of a folder of levels; [] otherwise."""
    for root in (suite / "KernelBench", suite):
        levels = sorted(p for p in root.glob("level*") if p.is_dir() and LEVEL.match(p.name))
        if levels:
            return levels
    return []


def task_files(folder: Path) -> list[tuple[str, Path]]:
    """(stem, path) of `NAME.py` (not `_private.py`) and `NAME/task.py` in one folder."""
    files = [(p.stem, p) for p in folder.glob("*.py") if not p.name.startswith("_")]
    files += [(p.parent.name, p) for p in folder.glob("*/task.py")]
    return files


def discover(suite: Path, only: list[str] | None = None) -> list[BenchProblem]:
    """Every problem of SUITE whose name (or stem) matches one of the `only` globs."""
    suite = Path(suite).expanduser()
    if not suite.is_dir():
        raise UsageError(
            f"bench: {suite} is not a folder of task files (or a KernelBench checkout)"
        )
    levels = level_folders(suite) or ([suite] if LEVEL.match(suite.name) else [])
    problems = []
    if levels:
        for folder in levels:
            for stem, path in task_files(folder):
                name = f"{folder.name}/{stem}"
                problems.append(_problem(name, path, folder.name))
    else:
        problems = [_problem(stem, path, None) for stem, path in task_files(suite)]
    globs = [g.strip() for g in only or [] if g.strip()]
    if globs:
        problems = [p for p in problems if _matches(p, globs)]
    if not problems:
        where = f" matching {', '.join(globs)}" if globs else ""
        raise UsageError(f"bench: no task files{where} in {suite}")
    return sorted(problems, key=lambda p: natural_key(p.name))


def _problem(name: str, path: Path, level: str | None) -> BenchProblem:
    return BenchProblem(
        name=name, path=str(path.resolve()), level=level, category=category_of(name)
    )


def _matches(problem: BenchProblem, globs: list[str]) -> bool:
    stem = problem.name.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(problem.name, g) or fnmatch.fnmatch(stem, g) for g in globs)


def natural_key(name: str) -> list:
    """`level1/2_x` before `level1/10_x`: digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
