"""The harness calls the compiler, verifier and profiler share: each candidate is compiled,
verified and profiled at most once per setting (cached in the store and the harness cache), so
a node re-run after a resume reads the earlier verdict instead of evaluating again."""

from __future__ import annotations

from pathlib import Path

from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.prebuild import MAX_DEVICE_BYTES, compile_key, prebuild_file
from kernelgraph.state.graph_state import GraphState, Outcome
from kernelgraph.state.models import validate_verdict
from kernelgraph.tools.device_slot import device_slot
from kernelgraph.tools.dsl import get_adapter
from kernelgraph.tools.harness.assemble import static_verdict
from kernelgraph.tools.harness.config import cache_key
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.harness.static_gate import run_static_checks
from kernelgraph.tools.harness.verdict import Failure, Verdict


def candidate_code(ctx: RunContext, candidate_id: str) -> str:
    row = ctx.store.get_candidate(candidate_id)
    if row is None or row.get("code") is None:
        raise KeyError(f"candidate {candidate_id} is not in the run store")
    return row["code"]


def candidate_file(ctx: RunContext, candidate_id: str) -> Path:
    """The candidate's code as a file the harness can load (written once, kept with the run)."""
    path = ctx.artifacts / "candidates" / f"{candidate_id}.py"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(candidate_code(ctx, candidate_id))
    return path


def failure_outcome(ctx: RunContext, candidate_id: str, verdict: Verdict, stage: str, eid=None):
    """An Outcome for a failed check; the full failure record goes to the store."""
    failure = verdict.failure
    record = {
        "status": verdict.status,
        "message": verdict.message,
        "check": failure.check if failure else None,
        "seed": failure.seed if failure else None,
        "shape": failure.shape if failure else None,
        "max_abs_err": failure.max_abs_err if failure else None,
        "max_rel_err": failure.max_rel_err if failure else None,
        "mismatches": failure.mismatches if failure else None,
        "detail": failure.message if failure else verdict.message,
    }
    first_line = (verdict.message or "").strip().splitlines()[0:1]
    return Outcome(
        candidate_id=candidate_id,
        status=verdict.status,
        stage=stage,
        message=first_line[0] if first_line else verdict.status,
        report_sha=ctx.put_json(record, "failure"),
        evaluation_id=eid,
    )


def compile_gate(ctx: RunContext, candidate_id: str) -> Verdict | None:
    """Static checks, then a compile for the device's target. None when both pass."""
    config = ctx.config.eval_config(profile=False)
    adapter = get_adapter(config.dsl)
    code = candidate_code(ctx, candidate_id)
    static = run_static_checks(code, adapter, config)
    if static is not None:
        return static_verdict(static, config)
    target = adapter.compile_target(config.device)
    if target is None:
        return None
    key = _compile_key(ctx, code, target)
    if ctx.prebuilder is not None:
        ctx.prebuilder.wait(key, config.timeout_s)  # compiled ahead and still under way
    report = ctx.eval_cache.get(key)
    if report is None:
        ctx.emit("compiler", f"compiling {candidate_id} for {target}")
        report = _compile(ctx, candidate_file(ctx, candidate_id), target)
        ctx.eval_cache.put(key, report)
    if report.get("ok"):
        return None
    verdict = Verdict(
        status="rejected" if report.get("stage", "").startswith("static") else "compile_error",
        message=f"compile for {target} failed: {report.get('message', '')}".strip(),
        dsl=config.dsl,
        device=config.device,
        policy=config.policy,
        precision=config.precision,
    )
    verdict.failure = Failure(check="compile", message=report.get("message", ""))
    return verdict


def run_harness(ctx: RunContext, candidate_id: str, profile: bool) -> tuple[Verdict, str]:
    """Verify (and with `profile`, time) a candidate; returns the verdict and its evaluation id.

    A verdict already in the store for the same code, task and settings is reused as is; under
    --no-cache only this candidate's own (a node re-run after a resume), never another run's.
    """
    config = ctx.config.eval_config(profile=profile)
    task = ctx.task()
    code = candidate_code(ctx, candidate_id)
    key = cache_key(code, task.hash, config)
    known = ctx.store.find_evaluation(key, None if ctx.use_cache else candidate_id)
    if known is not None:
        verdict = validate_verdict(known["verdict"])
        if known["candidate_id"] == candidate_id:
            return verdict, known["id"]
        verdict.cached = True
        return verdict, ctx.store.record_evaluation(candidate_id, verdict)
    what = "profiling" if profile else "verifying"
    ctx.emit("profiler" if profile else "verifier", f"{what} {candidate_id}")
    with device_slot(config.device, exclusive=profile):
        verdict = evaluate(
            task.path, candidate_file(ctx, candidate_id), config, ctx.eval_cache,
            use_cache=ctx.use_cache,
        )  # fmt: skip
    return verdict, ctx.store.record_evaluation(candidate_id, verdict)


def _compile_key(ctx: RunContext, code: str, target: str) -> str:
    config = ctx.config
    return compile_key(code, ctx.task().hash, config.dsl, target, config.timeout_s, config.policy)


def _compile(ctx: RunContext, kernel: Path, target: str) -> dict:
    from kernelgraph.tools.harness.compile_only import compile_only

    config = ctx.config
    # its inputs and traced forward use the device: never while something is timed there
    with device_slot(config.device, exclusive=False):
        return compile_only(
            config.task_path, kernel, config.dsl, target, config.sets, config.timeout_s,
            config.policy, inputs_device=config.device,
        )  # fmt: skip


def compile_ahead(ctx: RunContext, codes: list[str], min_bytes: int | None) -> int:
    """Queue compile checks of kernel files the brain will write next (nodes/prebuild.py);
    how many were queued. Skipped where the checks' inputs could crowd the device."""
    prebuilder = ctx.prebuilder
    target = get_adapter(ctx.config.dsl).compile_target(ctx.config.device)
    if prebuilder is None or target is None or not codes:
        return 0
    if min_bytes is None or min_bytes * prebuilder.workers > MAX_DEVICE_BYTES:
        return 0
    queued = 0
    for code in codes:
        key = _compile_key(ctx, code, target)
        if ctx.eval_cache.get(key) is not None:
            continue
        path = prebuild_file(ctx.artifacts, code)

        def build(key=key, path=path) -> None:
            ctx.eval_cache.put(key, _compile(ctx, path, target))

        queued += prebuilder.submit(key, build)
    return queued


def failure_update(state, outcome: Outcome) -> dict:
    """The state change after a failed check: the coder retries from the failing candidate."""
    line = f"{outcome.candidate_id}: {outcome.status}: {outcome.message}"
    return {
        "outcome": outcome,
        "attempts": state.attempts + 1,
        "recent_failures": [*state.recent_failures, line][-5:],
        "mode": "retry",
        "parent_id": outcome.candidate_id,
    }


def brain_stop(state: GraphState, exc: Exception, counts: dict[str, int]) -> dict:
    """The update that ends a run because the brain stopped (a budget, nothing left to try,
    a task the builtin cannot write): the reason, and the words for the summary."""
    failures = [*state.recent_failures, str(exc)][-5:]
    return {"llm_calls": counts, "stop_reason": exc.stop_reason, "recent_failures": failures}
