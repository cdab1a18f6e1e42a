"""`kernelgraph bench` end to end on the CPU: a small KernelBench-layout suite, each problem an
ordinary run (scripted model, real harness), the report, resume after a kill, and the errors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agent_helpers import CASES, TASK, kernel, write_script
from cli_helpers import ROOT, assert_readable_error, json_line, kernelgraph
from proc_helpers import wait_until_gone

from kernelgraph.graph.bench.suite import discover
from kernelgraph.tools.harness.verdict import UsageError

BROKEN = CASES / "tasks" / "bad_reference_raises.py"


def make_suite(root: Path, names: list[str], broken: bool = False) -> Path:
    """A KernelBench checkout's layout: KernelBench/level1/N_Name.py."""
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for name in names:
        shutil.copy(TASK, level / f"{name}.py")
    if broken:
        shutil.copy(BROKEN, level / "9_Broken.py")
    return root


def bench_args(suite: Path, script: Path, out: Path, *extra: str) -> list[str]:
    args = ["bench", str(suite), "--model", f"script:{script}", "--dsl", "cpp", "--device"]
    return args + ["cpu", "--seeds", "1", "--max-iterations", "2", "--out", str(out), *extra]


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """A wrong kernel first (the retry edge), then the right one."""
    return write_script(tmp_path, [kernel("cpp_scale_sub"), kernel("cpp_scale_add")])


def test_discover_names_problems_by_level_and_filters_them(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, ["10_Scale", "2_Scale"], broken=True)
    (suite / "KernelBench" / "level2").mkdir()
    shutil.copy(TASK, suite / "KernelBench" / "level2" / "1_Gemm_Scale.py")
    problems = discover(suite)
    assert [p.name for p in problems] == [
        "level1/2_Scale", "level1/9_Broken", "level1/10_Scale", "level2/1_Gemm_Scale"
    ]  # fmt: skip
    assert {p.level for p in problems} == {"level1", "level2"}
    assert problems[-1].category == "gemm"
    assert [p.name for p in discover(suite / "KernelBench" / "level1", ["2_*", "*Broken"])] == [
        "level1/2_Scale", "level1/9_Broken"
    ]  # fmt: skip
    flat = tmp_path / "flat"
    (flat / "softmax_rows").mkdir(parents=True)
    shutil.copy(TASK, flat / "softmax_rows" / "task.py")
    assert [(p.name, p.level, p.category) for p in discover(flat)] == [
        ("softmax_rows", None, "softmax")
    ]


@pytest.mark.parametrize(
    ("suite", "only", "fragment"),
    [("missing", None, "is not a folder"), ("suite", ["nothing*"], "no task files matching")],
)
def test_discover_says_what_is_wrong(tmp_path: Path, suite, only, fragment) -> None:
    make_suite(tmp_path / "suite", ["1_Scale"])
    with pytest.raises(UsageError, match=fragment):
        discover(tmp_path / suite, only)


@pytest.mark.slow
def test_a_bench_runs_every_problem_as_a_run_and_reports_kernelbench_figures(
    tmp_path: Path, script: Path
) -> None:
    suite = make_suite(tmp_path / "kb", ["1_ScaleAdd", "2_ScaleAdd"], broken=True)
    out, db = tmp_path / "bench", tmp_path / "kg.db"
    proc = kernelgraph(*bench_args(suite, script, out, "--db", str(db), "--json"), cwd=tmp_path)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    data = json_line(proc)
    overall = data["summary"]["overall"]
    assert (overall["problems"], overall["verified"]) == (3, 2)
    assert overall["fast_p_eager"]["0"] == pytest.approx(2 / 3)
    assert data["summary"]["by_level"]["level1"]["problems"] == 3
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_name = {r["problem"]: r for r in results}
    assert by_name["level1/9_Broken"]["status"] == "task_error"
    good = by_name["level1/1_ScaleAdd"]
    assert good["status"] == "verified" and good["candidates"] == 2  # a retry, then verified
    assert good["kernel_ms"] > 0 and good["speedup_vs_eager"] > 0
    assert good["first_verified_s"] > 0 and good["flops"] is not None
    # every problem is an ordinary run: show and export work on it
    shown = json_line(kernelgraph("show", good["run_id"], "--db", str(db), "--json", cwd=tmp_path))
    assert shown["verdict"]["status"] == "passed"
    report = (out / "report.md").read_text()
    assert "level1/9_Broken" in report and "task_error" in report
    assert (out / "report.html").read_text().count("data:image/png;base64,") >= 4
    again = kernelgraph("bench", "--resume", str(out), "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (json_line(again)["ran"], json_line(again)["skipped"]) == (0, 3)


@pytest.mark.slow
def test_a_killed_bench_resumes_its_unfinished_run_and_skips_the_finished_ones(
    tmp_path: Path, script: Path
) -> None:
    suite = make_suite(tmp_path / "kb", ["1_ScaleAdd", "2_ScaleAdd"])
    out, db = tmp_path / "bench", tmp_path / "kg.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELGRAPH_WORK_DIR": str(tmp_path / "work")}
    (tmp_path / "work").mkdir()
    bench = subprocess.Popen(
        [sys.executable, "-m", "kernelgraph.graph.cli", *bench_args(suite, script, out, "--db", str(db))],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for line in bench.stderr:  # the second problem's run has started: kill the bench
        if "start level1/2_ScaleAdd" in line:
            break
    second_run = _wait_for_started(out, "level1/2_ScaleAdd")
    bench.kill()
    bench.wait(timeout=30)
    assert wait_until_gone(tmp_path / "work", within_s=60) == [], "a run outlived its bench"
    assert wait_until_gone(str(out), within_s=60) == []
    manifest = json.loads((out / "bench.json").read_text())
    assert manifest["environment"]["executor"] == "local" and manifest["environment"]["host"]
    report = kernelgraph("report", str(out), cwd=tmp_path, env=env)  # a killed bench's report
    assert report.returncode == 0, report.stderr
    assert "| runs finished | 1 / 2 (unfinished" in (out / "report.md").read_text()

    resumed = kernelgraph("bench", "--resume", str(out), "--json", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    data = json_line(resumed)
    assert (data["ran"], data["skipped"]) == (1, 1)
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert data["summary"]["overall"]["verified"] == 2, [  # what the unverified one said
        {k: r.get(k) for k in ("problem", "status", "stop_reason", "message")} for r in results
    ]
    assert [r["run_id"] for r in results if r["problem"] == "level1/2_ScaleAdd"] == [second_run]
    evaluated = subprocess.run(
        ["sqlite3", str(db), "SELECT cache_key, count(*) FROM evaluations WHERE "
         "json_extract(verdict, '$.cached') = 0 GROUP BY cache_key HAVING count(*) > 1"],
        capture_output=True, text=True,
    ) if shutil.which("sqlite3") else None  # fmt: skip
    assert evaluated is None or evaluated.stdout.strip() == ""  # nothing evaluated twice


def _wait_for_started(out: Path, problem: str, within_s: float = 60.0) -> str:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        path = out / "started.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        ids = [r["run_id"] for r in rows if r["problem"] == problem]
        if ids:
            return ids[0]
        time.sleep(0.05)  # the bench writes the line as the run prints its id
    raise AssertionError(f"{problem} never started")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["bench"], "give a SUITE folder, or --resume DIR"),
        (["bench", "--resume", "nowhere"], "is not a bench folder"),
        (["bench", "missing_suite"], "is not a folder of task files"),
    ],
)
def test_bench_usage_errors_are_one_readable_line(tmp_path: Path, args, fragment) -> None:
    proc = kernelgraph(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert_readable_error(proc, fragment)


def test_bench_refuses_to_overwrite_a_bench_folder(tmp_path: Path, script: Path) -> None:
    suite = make_suite(tmp_path / "kb", ["1_ScaleAdd"])
    out = tmp_path / "bench"
    out.mkdir()
    (out / "bench.json").write_text("{}")
    proc = kernelgraph(*bench_args(suite, script, out), cwd=tmp_path)
    assert proc.returncode == 2
    assert_readable_error(proc, f"kernelgraph bench --resume {out}")


@pytest.mark.slow
def test_sigterm_stops_the_bench_cleanly_and_says_how_to_go_on(tmp_path: Path, script: Path):
    suite = make_suite(tmp_path / "kb", ["1_ScaleAdd"])
    out, db = tmp_path / "bench", tmp_path / "kg.db"
    bench = subprocess.Popen(
        [sys.executable, "-m", "kernelgraph.graph.cli", *bench_args(suite, script, out, "--db", str(db))],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    run_id = _wait_for_started(out, "level1/1_ScaleAdd")
    bench.send_signal(signal.SIGTERM)
    _, errs = bench.communicate(timeout=120)
    assert bench.returncode == 3, errs
    assert f"kernelgraph bench --resume {out}" in " ".join(errs.split())
    assert "Traceback" not in errs
    assert not (out / "results.jsonl").exists()  # an interrupted run is owed, not a result
    listed = json_line(kernelgraph("runs", "--db", str(db), "--json", cwd=tmp_path))
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "interrupted")]


def test_a_run_past_its_cap_ends_as_timeout_and_the_bench_goes_on(tmp_path: Path, script: Path):
    suite = make_suite(tmp_path / "kb", ["1_ScaleAdd"])
    out = tmp_path / "bench"
    args = bench_args(suite, script, out, "--db", str(tmp_path / "kg.db"), "--task-timeout", "1")
    proc = kernelgraph(*args, "--json", cwd=tmp_path)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    (result,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert (result["status"], result["verified"]) == ("timeout", False)
    assert "level1/1_ScaleAdd" in (out / "report.md").read_text().split("Not verified")[1]


def test_a_bench_runs_each_problem_as_a_parallel_search(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "kb", ["1_ScaleAdd"])
    script = write_script(tmp_path, [kernel("cpp_scale_add"), kernel("cpp_scale_add_omp")])
    out, db = tmp_path / "bench", tmp_path / "kg.db"
    args = bench_args(suite, script, out, "--db", str(db), "--json", "--width", "2")
    proc = kernelgraph(*args, cwd=tmp_path)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    run_args = json.loads((out / "bench.json").read_text())["settings"]["run_args"]
    assert run_args[run_args.index("--width") :][:4] == ["--width", "2", "--islands", "1"]
    (result,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert result["status"] == "verified"
    shown = json_line(
        kernelgraph("show", result["run_id"], "--db", str(db), "--json", cwd=tmp_path)
    )
    assert shown["search"]["round"] == 1  # both lanes in one round: the run was a search
