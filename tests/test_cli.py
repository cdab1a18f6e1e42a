"""The `kernelgraph evaluate` contract, through the real command line in a subprocess.

--json: exactly one JSON object, on the last (and only) line of stdout. Exit codes: 0 passed,
1 any other verdict, 2 bad usage or an invalid task (a readable message on stderr, no
traceback), 3 a harness failure (the machine's). A repeated evaluation is served from the cache;
--store records it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_readable_error, json_line, kernelgraph

from kernelgraph.state.store import open_store
from kernelgraph.tools.harness.verdict import HarnessError
from kernelgraph.tools.task import TaskSource

ROOT = Path(__file__).resolve().parents[1]
TIMING_FIELDS = {
    "kernel_ms",
    "eager_ms",
    "torch_compile_ms",
    "speedup_vs_eager",
    "speedup_vs_compile",
    "spread_pct",
}
VERDICT_FIELDS = {
    "status",
    "checks",
    "failure",
    "message",
    "policy",
    "precision",
    "timing",
    "sol_pct",
    "env",
}


def evaluate_args(cases: Path, task: str, kernel: str, *extra: str) -> list[str]:
    return [
        "evaluate",
        str(cases / "tasks" / f"{task}.py"),
        str(cases / "kernels" / f"{kernel}.py"),
        "--dsl",
        "cpp",
        "--device",
        "cpu",
        "--seeds",
        "2",
        "--json",
        *extra,
    ]


@pytest.fixture(scope="module")
def stored_run(kernelgraph_cache, cases, tmp_path_factory):
    """One real, profiled evaluation of a correct kernel, recorded in a fresh store."""
    workdir = tmp_path_factory.mktemp("cli")
    db = workdir / "runs.db"
    args = evaluate_args(cases, "scale_add", "cpp_scale_add", "--no-cache", "--store")
    proc = kernelgraph(*args, "--db", str(db), cwd=workdir)
    return proc, db, workdir


def test_passed_verdict_json_contract(stored_run):
    proc, _, _ = stored_run
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    verdict = json_line(proc)
    assert VERDICT_FIELDS <= verdict.keys()
    assert TIMING_FIELDS <= verdict["timing"].keys()
    assert verdict["status"] == "passed" and verdict["failure"] is None
    assert (verdict["policy"], verdict["precision"]) == ("strict", "fp32")
    assert all(check["passed"] for check in verdict["checks"])
    timing = verdict["timing"]
    assert timing["kernel_ms"] > 0 and timing["eager_ms"] > 0
    assert timing["speedup_vs_eager"] == pytest.approx(timing["eager_ms"] / timing["kernel_ms"])
    assert timing["torch_compile_ms"] is None and timing["speedup_vs_compile"] is None
    assert timing["spread_pct"] >= 0
    assert verdict["sol_pct"] is None or verdict["sol_pct"] > 0
    assert verdict["env"]["device"] == "cpu" and verdict["env"]["torch_version"]
    assert verdict["cached"] is False


def test_store_records_the_run(stored_run):
    proc, db, workdir = stored_run
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    verdict = json_line(proc)
    store = open_store(db)
    try:
        runs = store.list_runs()
        assert len(runs) == 1
        assert runs[0]["kind"] == "evaluate" and runs[0]["status"] == "passed"
        evaluations = store.evaluations_for_run(runs[0]["id"])
        assert [e["status"] for e in evaluations] == ["passed"]
        assert evaluations[0]["cache_key"] == verdict["cache_key"]
        assert evaluations[0]["kernel_ms"] == pytest.approx(verdict["timing"]["kernel_ms"])
    finally:
        store.close()
    assert not (workdir / "runs").exists()  # --db was honoured


def test_store_keys_the_run_by_the_task_hash(stored_run, cases):
    _, db, _ = stored_run
    store = open_store(db)
    try:
        run = store.list_runs()[0]
    finally:
        store.close()
    assert run["task_hash"] == TaskSource.read(cases / "tasks/scale_add.py").hash


def test_second_identical_evaluate_is_served_from_the_cache(stored_run, cases, tmp_path):
    proc, _, _ = stored_run
    first = json_line(proc)
    # Were anything to run, it would need a work directory; this one does not exist.
    again = kernelgraph(
        *evaluate_args(cases, "scale_add", "cpp_scale_add"),
        cwd=tmp_path,
        env={"KERNELGRAPH_WORK_DIR": str(tmp_path / "missing")},
    )
    assert again.returncode == 0, again.stderr
    verdict = json_line(again)
    assert verdict["cached"] is True
    assert verdict["cache_key"] == first["cache_key"]
    assert verdict["timing"] == first["timing"]


def test_other_verdict_exits_1(cases, tmp_path):
    proc = kernelgraph(*evaluate_args(cases, "scale_add", "torch_softmax"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    verdict = json_line(proc)
    assert verdict["status"] == "rejected"
    assert verdict["failure"]["check"] == "static_python"


@pytest.mark.parametrize(
    "task, kernel, extra, fragment",
    [
        # a repeated option takes its last value, as in click
        ("scale_add", "cpp_scale_add", ["--dsl", "fortran"], "unknown DSL 'fortran'"),
        ("scale_add", "cpp_scale_add", ["--device", "cuda"], "--dsl cpp runs on cpu"),
        ("scale_add", "cpp_scale_add", ["--seeds", "0"], "--seeds must be at least 1"),
        ("scale_add", "cpp_scale_add", ["--precision", "fp64"], "--precision must be one of"),
        (
            "scale_add",
            "cpp_scale_add",
            ["--set", "BATCH=4"],
            "Its size constants are: ROWS=64, COLS=256",
        ),
        ("scale_add", "cpp_scale_add", ["--set", "ROWS=four"], "is not a Python literal"),
        ("no_such_task", "cpp_scale_add", [], "cannot read task file"),
        ("scale_add", "no_such_kernel", [], "cannot read kernel file"),
        ("bad_no_get_inputs", "cpp_scale_add", [], "does not define get_inputs"),
        ("bad_reference_raises", "cpp_scale_add", [], "the reference raises in Model.forward"),
    ],
)
def test_bad_usage_and_invalid_tasks_exit_2_with_a_readable_message(
    task, kernel, extra, fragment, cases, tmp_path
):
    proc = kernelgraph(*evaluate_args(cases, task, kernel, *extra), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert_readable_error(proc, fragment)
    assert "error" in json_line(proc)  # --json: even an error is one JSON line


def test_a_harness_failure_exits_3_with_one_readable_line(cases, monkeypatch, capsys):
    """In process, with the harness's entry point failing as a machine would."""
    import kernelgraph.graph.cli as cli
    import kernelgraph.tools.harness.evaluate as harness_evaluate

    configs = []

    def machine_failure(task, kernel, config, cache=None, use_cache=True):
        configs.append(config)
        raise HarnessError("the candidate worker was killed from outside (SIGKILL).")

    monkeypatch.setattr(harness_evaluate, "evaluate", machine_failure)
    options = ["--max-host-memory", "2.5", "--share-weights"]
    args = evaluate_args(cases, "scale_add", "cpp_scale_add", *options)
    monkeypatch.setattr(sys, "argv", ["kernelgraph", *args])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 3
    out, err = capsys.readouterr()
    error = json.loads(out)
    assert error["kind"] == "harness" and "killed from outside (SIGKILL). Try" in error["error"]
    assert err.startswith("error:") and "Traceback" not in err
    assert (configs[0].max_host_gb, configs[0].share_weights) == (2.5, True)


def test_an_interrupt_before_a_run_starts_says_how_to_resume(monkeypatch, capsys):
    import kernelgraph.graph.cli as cli

    def interrupted(**_):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "app", interrupted)
    monkeypatch.setattr(sys, "argv", ["kernelgraph", "run", "task.py", "--json"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 130
    out, err = capsys.readouterr()
    assert json.loads(out)["kind"] == "interrupted"  # --json still gets its one line
    assert "kernelgraph resume RUN_ID" in " ".join(err.split()) and "Traceback" not in err


def test_the_program_exits_even_when_a_thread_would_hold_it(tmp_path):
    """A signal that lands while a thread pool starts a worker leaves a thread that waits for
    work forever, and Python's exit joins it: a stopped run printed its summary and hung. The
    program (`entry`) exits with its code once its grace is over; in-process `main` does not."""
    stuck = (
        "import sys, threading, graph.cli as cli\n"
        "def main():\n"
        "    threading.Thread(target=threading.Event().wait).start()  # never ends\n"
        '    print(\'{"status": "interrupted"}\')\n'
        "    sys.exit(3)\n"
        "cli.main, cli.EXIT_GRACE_S = main, 0.2\n"
        "cli.entry()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", stuck], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 3
    assert json.loads(proc.stdout) == {"status": "interrupted"}  # flushed before the exit


def test_an_internal_error_keeps_its_traceback_in_a_file_without_keys(tmp_path):
    """A bug in kernelgraph itself prints one line naming a file with the traceback (a long GPU
    run should not have to be repeated to see it); API keys in it are masked."""
    key = "sk-test-0123456789abcdef"
    crash = (
        "import sys, graph.cli as cli\n"
        "def app(**_):\n"
        f"    raise FileNotFoundError(2, 'No such file or directory ({key})')\n"
        "cli.app = app\n"
        "sys.argv = ['kernelgraph', 'runs']\n"
        "cli.main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELGRAPH_CACHE_DIR": str(tmp_path),
           "OPENAI_API_KEY": key}  # fmt: skip
    env.pop("KERNELGRAPH_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", crash], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 3
    message = " ".join(proc.stderr.split())
    assert "internal error: FileNotFoundError" in message and "Traceback" not in proc.stderr
    assert key not in proc.stderr
    saved = list((tmp_path / "errors").glob("*.txt"))
    assert len(saved) == 1 and str(saved[0]) in "".join(proc.stderr.split())
    text = saved[0].read_text()
    assert "Traceback" in text and "in app" in text and "kernelgraph runs" in text
    assert key not in text and "***" in text
