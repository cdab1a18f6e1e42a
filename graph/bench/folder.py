"""A bench folder on disk: `bench.json` (the manifest), `results.jsonl` (one SampleResult per
finished job, appended), `started.jsonl` (each job's run id as soon as its run starts), `logs/`
(each run's stderr) and the reports. Appends are whole lines under an flock, so a kill leaves
at most one torn last line, which reading skips."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

from pydantic import ValidationError

from kernelgraph.state.bench import MANIFEST_VERSION, BenchManifest, SampleResult
from kernelgraph.tools.harness.verdict import UsageError

MANIFEST = "bench.json"
RESULTS = "results.jsonl"
STARTED = "started.jsonl"


def write_manifest(folder: Path, manifest: BenchManifest) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MANIFEST
    tmp = path.with_suffix(".tmp")
    tmp.write_text(manifest.model_dump_json(indent=2))
    tmp.replace(path)


def read_manifest(folder: Path) -> BenchManifest:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise UsageError(
            f"{folder} is not a bench folder (no {MANIFEST}); start one with bench SUITE"
        )
    try:
        manifest = BenchManifest.model_validate_json(path.read_text())
    except (ValidationError, ValueError) as exc:
        raise UsageError(f"{path} cannot be read ({str(exc).splitlines()[0]})") from exc
    if manifest.version != MANIFEST_VERSION:
        raise UsageError(
            f"{path} is bench format {manifest.version}; this kernelgraph reads {MANIFEST_VERSION}"
        )
    return manifest


def _lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a kill
        if isinstance(row, dict):
            rows.append(row)
    return rows


def append_line(path: Path, row: dict) -> None:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps(row) + "\n")


def read_results(folder: Path) -> list[SampleResult]:
    results = []
    for row in _lines(Path(folder) / RESULTS):
        try:
            results.append(SampleResult.model_validate(row))
        except ValidationError:
            continue
    return results


def append_result(folder: Path, result: SampleResult) -> None:
    append_line(Path(folder) / RESULTS, result.model_dump(mode="json"))


def started_runs(folder: Path) -> dict[tuple[str, int], str]:
    """(problem, sample) -> the run id its last start printed."""
    return {
        (row["problem"], int(row["sample"])): row["run_id"]
        for row in _lines(Path(folder) / STARTED)
        if {"problem", "sample", "run_id"} <= row.keys()
    }
