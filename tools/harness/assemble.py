"""Turning worker reports into one Verdict: checks, status, failure, timing and SOL."""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.cpu_pressure import contended
from kernelgraph.tools.harness.memory import over_host_limit
from kernelgraph.tools.harness.sol_fill import fill_sol
from kernelgraph.tools.harness.static_gate import StaticFailure
from kernelgraph.tools.harness.verdict import (
    COMPILE_ERROR,
    CRASHED,
    INCORRECT,
    PASSED,
    REJECTED,
    TIMEOUT,
    Check,
    CheckName,
    Failure,
    Timing,
    Verdict,
    status_for_failed_check,
)
from kernelgraph.tools.harness.worker import SELF_LIMIT_EXIT

# When several checks fail, the verdict names the most fundamental one.
STATUS_ORDER = (COMPILE_ERROR, TIMEOUT, CRASHED, REJECTED, INCORRECT)
JUDGE_CHECKS = {
    "seed": {
        "correctness": CheckName.CORRECTNESS,
        "output_shape": CheckName.OUTPUT_SHAPE,
        "output_type": CheckName.OUTPUT_TYPE,
        "non_constant_output": CheckName.NON_CONSTANT_OUTPUT,
        "buffer_updates": CheckName.BUFFER_UPDATES,
    },
}
TIMING_SLACK_FACTOR = 4.0
TIMING_SLACK_MS = 1000.0
CONTENDED_LOOP = "while other work kept the CPUs busy"


def _base(config: EvalConfig, status: str, message: str) -> Verdict:
    return Verdict(
        status=status,
        message=message,
        dsl=config.dsl,
        device=config.device,
        policy=config.policy,
        precision=config.precision,
    )


def static_verdict(static: StaticFailure, config: EvalConfig) -> Verdict:
    if static.is_syntax_error:
        check, status = CheckName.COMPILE, COMPILE_ERROR
    else:
        check, status = static.check, REJECTED
    message = static.message()
    verdict = _base(config, status, f"{status}: {message}")
    verdict.checks = [Check(check, False, message)]
    verdict.failure = Failure(check=check, message=message)
    return verdict


def assemble(config: EvalConfig, adapter, meta: dict, cand, judge) -> Verdict:
    checks = [Check(CheckName.STATIC_PYTHON, True), Check(CheckName.STATIC_NATIVE, True)]
    failures: list[Failure] = []
    report = cand.result or {}

    def fail(name: str, message: str, **extra: Any) -> None:
        checks.append(Check(name, False, message))
        failures.append(Failure(check=name, message=message, **extra))

    process_problem = _process_problem(cand, report)
    if process_problem:
        fail(*process_problem)
    else:
        checks.append(Check(CheckName.COMPILE, True, "built and constructed"))
        checks.append(
            Check(
                CheckName.RUNS,
                True,
                "ran every seed" + (" and the timing loop" if config.profile else ""),
            )
        )
        for c in report.get("checks", []):
            if not c["passed"]:
                fail(c["name"], c["detail"])
        _guard_checks(config, meta, report, fail, checks)
        _judge_checks(judge, fail, checks)
        if config.profile and report.get("timing"):
            _timing_check(report, cand, judge, fail, checks)

    status = _status(failures)
    verdict = _base(config, status, "")
    verdict.checks = checks
    verdict.failure = _first_failure(failures, status)
    verdict.warnings = list(meta.get("warnings", [])) + adapter.notes(
        config.device, set(meta.get("dtypes", []))
    )
    if judge and judge.result:
        verdict.env = judge.result.get("env", {})
        verdict.env["dsl_version"] = adapter.version()
    if status == PASSED and config.profile:
        _fill_timing(verdict, config, meta, report, judge)
    verdict.message = _message(verdict, config)
    return verdict


def _process_problem(cand, report: dict) -> tuple | None:
    proc = cand.process
    if proc.timed_out or proc.returncode == SELF_LIMIT_EXIT:
        return (
            CheckName.RUNS,
            f"timed out: killed after {proc.wall_s:.0f} s (the --timeout limit)",
        )
    if proc.rss_exceeded:
        return (
            CheckName.RUNS,
            f"crashed: host memory exceeded the limit "
            f"({over_host_limit(proc.peak_rss_bytes, proc.rss_limit_bytes)})",
        )
    if cand.result is None:
        how = (
            f"killed by {proc.signal_name}" if proc.signal_name else f"exit code {proc.returncode}"
        )
        return (
            CheckName.RUNS,
            f"crashed: the candidate process died ({how}).\n{proc.log_tail[-1500:]}",
        )
    if "error" in report:
        return (CheckName.RUNS, f"crashed: {report['error']}")
    status = report.get("status")
    if status == COMPILE_ERROR:
        return (CheckName.COMPILE, report.get("message", "compile error"))
    if status != "ok":
        stage = report.get("stage", "run")
        return (CheckName.RUNS, f"crashed during {stage}: {report.get('message', '')}")
    return None


def _guard_checks(config: EvalConfig, meta: dict, report: dict, fail, checks) -> None:
    launches = report.get("launches", {})
    idle = [seed for seed, n in launches.items() if n <= 0]
    if idle or not launches:
        fail(
            CheckName.KERNEL_LAUNCHED,
            f"no {config.dsl} kernel ran during forward (seeds {', '.join(idle) or 'all'}): the "
            f"output did not come from a kernel of the declared DSL",
        )
    else:
        checks.append(Check(CheckName.KERNEL_LAUNCHED, True, f"{sum(launches.values())} launches"))
    from kernelgraph.tools.harness.op_policy import violations

    bad = violations(report.get("ops", {}).keys(), config.policy)
    if bad:
        fail(
            CheckName.ATEN_OPS,
            f"forward executed PyTorch compute ops that the {config.policy} policy forbids: "
            f"{', '.join(sorted(bad)[:8])}",
        )
    else:
        checks.append(Check(CheckName.ATEN_OPS, True, f"{config.policy} policy"))
    changed = report.get("changed_inputs", [])
    if changed and not meta.get("ref_mutates_inputs"):
        seed, index = changed[0]
        fail(
            CheckName.INPUTS_UNMODIFIED,
            f"forward modified input {index} in place (seed {seed}); the reference does not",
            seed=seed,
        )
    else:
        checks.append(Check(CheckName.INPUTS_UNMODIFIED, True))
    aliased = report.get("aliasing", [])
    if aliased and not meta.get("ref_output_aliases_input"):
        seed, out, inp = aliased[0]
        fail(
            CheckName.OUTPUT_NOT_ALIASED,
            f"output {out} shares memory with input {inp} (seed {seed}); the reference's does not",
            seed=seed,
        )
    else:
        checks.append(Check(CheckName.OUTPUT_NOT_ALIASED, True))


def _judge_checks(judge, fail, checks) -> None:
    if judge is None or not judge.result:
        return
    seen_failure = {"seed": False, "timing": False}
    comparisons = judge.result.get("comparisons", [])
    wrong_everywhere = any(e["kind"] == "seed" and not e["passed"] for e in comparisons)
    for entry in comparisons:
        kind = entry["kind"]
        if entry["passed"] or seen_failure[kind]:
            continue
        if kind == "timing" and wrong_everywhere:
            continue  # plainly incorrect: the post-timing check exists to catch replayed results
        seen_failure[kind] = True
        name = JUDGE_CHECKS["seed"].get(entry.get("check"), CheckName.CORRECTNESS)
        message = f"seed {entry['seed']}: {entry['message']}"
        if kind == "timing":
            name = CheckName.POST_TIMING_OUTPUT
            message = (
                "the output of the last timed call is wrong (results cached or replayed across "
                f"calls?): {entry['message']}"
            )
        fail(
            name,
            message,
            seed=entry["seed"],
            shape=entry.get("shape"),
            max_abs_err=entry.get("max_abs_err"),
            max_rel_err=entry.get("max_rel_err"),
            mismatches=entry.get("mismatches"),
        )
    if not seen_failure["seed"]:
        n = sum(1 for e in judge.result.get("comparisons", []) if e["kind"] == "seed")
        checks.append(Check(CheckName.CORRECTNESS, True, f"{n} seeds match the reference"))
        checks.append(Check(CheckName.NON_CONSTANT_OUTPUT, True))
        if names := judge.result.get("buffers_checked"):
            detail = f"{', '.join(names)} updated as the reference's forward updates them"
            checks.append(Check(CheckName.BUFFER_UPDATES, True, detail))
    if (
        any(e["kind"] == "timing" for e in judge.result.get("comparisons", []))
        and not seen_failure["timing"]
    ):
        checks.append(Check(CheckName.POST_TIMING_OUTPUT, True, "last timed call's output matches"))


def _timing_check(report: dict, cand, judge, fail, checks) -> None:
    """Claimed times must be consistent with the wall clock the parent measured."""
    claimed, marks = report["timing"], cand.marks
    if claimed.get("side_stream_suspected"):
        fail(
            CheckName.NO_SIDE_STREAM,
            "the GPU stayed busy after forward's stream had finished (work left on a side "
            "stream, not ordered with the caller's)",
        )
    if report.get("timing_launches", 0) < claimed["iterations"]:
        fail(
            CheckName.KERNEL_LAUNCHED,
            f"only {report.get('timing_launches', 0)} kernel launches in {claimed['iterations']} "
            f"timed calls: results were served without running a kernel",
        )
    if "start" not in marks or "end" not in marks:
        fail(
            CheckName.TIMING_CONSISTENT,
            "the timing loop's start/end marks never reached the parent; its timings cannot be trusted",
        )
        return
    window_ms = (marks["end"] - marks["start"]) * 1e3
    iters = claimed["iterations"]
    overhead_ms = 0.0
    eager = (judge.result or {}).get("eager") if judge else None
    if eager:
        overhead_ms = max(eager["wall_ms"] / eager["iterations"] - eager["median_ms"], 0.0)
    floor_ms = claimed["median_ms"] * iters * 0.5
    # The timed calls' sum, not median x iterations: under contention the times split in two
    # modes, and a median in the slow one overstates the sum of an honest loop.
    total_ms = claimed.get("total_ms") or claimed["median_ms"] * iters
    if total_ms > window_ms * 1.05 + 50:
        fail(
            CheckName.TIMING_CONSISTENT,
            f"claimed {iters} timed calls of {total_ms:.1f} ms in all (median "
            f"{claimed['median_ms']:.4f} ms), more than the {window_ms:.1f} ms the parent measured",
        )
        return
    expected = (iters + 3) * (claimed["median_ms"] + overhead_ms)
    if window_ms > TIMING_SLACK_FACTOR * expected + TIMING_SLACK_MS + floor_ms:
        stalls = cand.cpu_stalls
        busy = contended(stalls.get("start"), stalls.get("end"), window_ms / 1e3)
        fail(
            CheckName.TIMING_CONSISTENT,
            f"the claimed median {claimed['median_ms']:.4f} ms over {iters} iterations is far below "
            f"the {window_ms:.0f} ms the parent measured for the timing loop"
            + (f", {CONTENDED_LOOP}" if busy else ""),
        )
        return
    checks.append(
        Check(CheckName.TIMING_CONSISTENT, True, f"{window_ms:.0f} ms wall for {iters} timed calls")
    )


def contended_rejection(verdict: Verdict) -> bool:
    """A loop the median cannot account for is a lie, unless the CPUs were contended meanwhile:
    then an honest kernel may have been slowed between its timed calls, and the evaluation is
    tried again before the rejection stands."""
    failure = verdict.failure
    return (
        failure is not None
        and failure.check == CheckName.TIMING_CONSISTENT
        and failure.message.endswith(CONTENDED_LOOP)
    )


def _status(failures: list[Failure]) -> str:
    statuses = {_failure_status(f) for f in failures}
    for status in STATUS_ORDER:
        if status in statuses:
            return status
    return PASSED


def _failure_status(failure: Failure) -> str:
    if failure.check == CheckName.RUNS and failure.message.startswith("timed out"):
        return TIMEOUT
    return status_for_failed_check(failure.check)


def _first_failure(failures: list[Failure], status: str) -> Failure | None:
    for failure in failures:
        if _failure_status(failure) == status:
            return failure
    return None


def _fill_timing(verdict: Verdict, config: EvalConfig, meta: dict, report: dict, judge) -> None:
    claimed = report["timing"]
    result = judge.result if judge else {}
    eager = result.get("eager") or {}
    compiled = result.get("compile") or {}
    timing = Timing(
        kernel_ms=claimed["median_ms"],
        eager_ms=eager.get("median_ms"),
        torch_compile_ms=compiled.get("median_ms"),
        spread_pct=round(claimed["spread_pct"], 2),
        stable=claimed["stable"],
        iterations=claimed["iterations"],
        timer=claimed["timer"],
        baseline_cached=bool(result.get("baseline_cached")),
    )
    if timing.eager_ms:
        timing.speedup_vs_eager = timing.eager_ms / timing.kernel_ms
    if timing.torch_compile_ms:
        timing.speedup_vs_compile = timing.torch_compile_ms / timing.kernel_ms
    if compiled.get("error"):
        verdict.warnings.append(compiled["error"])
    if not claimed["stable"]:
        verdict.warnings.append(
            f"unstable timing: the interquartile spread is {claimed['spread_pct']:.1f}% of the median"
        )
    interpreted = config.dsl == "triton" and config.device == "cpu"
    if interpreted:
        timing.timer = "triton_interpreter"
        verdict.warnings.append(
            "timings come from the Triton interpreter on CPU and say nothing about GPU speed"
        )
    verdict.timing = timing
    fill_sol(verdict, config, meta, result.get("peaks"))


def _message(verdict: Verdict, config: EvalConfig) -> str:
    if verdict.status != PASSED:
        failure = verdict.failure
        first_line = failure.message.splitlines()[0] if failure else ""
        if first_line.startswith(f"{verdict.status.replace('_', ' ')}") or first_line.startswith(
            verdict.status
        ):
            return first_line
        return f"{verdict.status}: {first_line}"
    t = verdict.timing
    parts = [f"passed {config.seeds} seeds under the {config.policy} policy"]
    if t.kernel_ms is not None:
        parts.append(f"kernel {t.kernel_ms:.4f} ms")
    if t.speedup_vs_eager:
        parts.append(f"{t.speedup_vs_eager:.2f}x eager")
    if verdict.sol_pct is not None:
        parts.append(f"{verdict.sol_pct:.0f}% of speed-of-light")
    return ", ".join(parts)
