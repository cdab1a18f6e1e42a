"""The parent side of an evaluation: static checks, the task's reference, three sandboxed workers.

prepare (the reference: validate the task, write inputs and reference outputs into the reference
store, once per task and machine) -> candidate (untrusted: run, guard, time; the store's
reference outputs are hidden from it and its inputs read-only) -> judge (after the candidate's
process group is dead: compare with the reference's outputs, time the baselines the store lacks).
No candidate code ever runs in this process. Standard library only.
"""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path

from kernelgraph.tools.dsl import get_adapter
from kernelgraph.tools.harness.assemble import assemble, contended_rejection, static_verdict
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig, cache_key
from kernelgraph.tools.harness.evaluation import Evaluation, prepare_meta, read_kernel
from kernelgraph.tools.harness.extra_shapes import check_extra_shapes
from kernelgraph.tools.harness.infra import InfraFailure, retried
from kernelgraph.tools.harness.janitor import JANITOR
from kernelgraph.tools.harness.reference import pool_seeds, reference_seeds, verification_seeds
from kernelgraph.tools.harness.refstore import RefEntry, ReferenceStore, ephemeral_entry, store_key
from kernelgraph.tools.harness.sandbox import isolation
from kernelgraph.tools.harness.static_gate import run_static_checks
from kernelgraph.tools.harness.verdict import TaskError, UsageError, Verdict
from kernelgraph.tools.harness.workers import (
    PendingWorker,
    WorkerRun,
)
from kernelgraph.tools.task import TaskSource


def evaluate(
    task_path: str | Path,
    kernel_path: str | Path,
    config: EvalConfig,
    cache: EvalCache | None = None,
    use_cache: bool = True,
) -> Verdict:
    """Verify and profile one candidate. Raises TaskError/UsageError (exit code 2) and
    HarnessError (the machine failed twice)."""
    task = TaskSource.read(task_path, config.sets)
    kernel = Path(kernel_path)
    code = read_kernel(kernel)
    adapter = _check_config(config)
    key = cache_key(code, task.hash, config)
    cache = cache or EvalCache()
    if use_cache and (hit := cache.get(key)):
        verdict = Verdict.from_dict(hit)
        verdict.cached = True
        return verdict

    static = run_static_checks(code, adapter, config)
    if static is not None:
        verdict = static_verdict(static, config)
    else:
        run = functools.partial(_run_workers, use_cache=use_cache)
        verdict = run(task, kernel, config, adapter)
        if config.extra_shapes:
            verdict.extra_shapes = check_extra_shapes(task, kernel, config, run, adapter)
    verdict.cache_key = key
    verdict.isolation = isolation().describe()
    if not verdict.isolation["secrets_protected"]:
        verdict.warnings.append(verdict.isolation["note"])
    cache.put(key, verdict.to_dict())
    return verdict


def _run_workers(
    task: TaskSource, kernel: Path, config: EvalConfig, adapter, use_cache: bool = True
) -> Verdict:
    """One evaluation, tried again when the machine (not the task or kernel) failed it."""

    def attempt() -> Verdict:
        ev = Evaluation(task, kernel, config)
        try:
            with _reference(ev, config, use_cache) as (store, entry):
                verdict = _evaluate(ev, store, entry, adapter)
        finally:
            closing = time.monotonic()
            ev.close()
        verdict.phases_s["parent.close"] = round(time.monotonic() - closing, 3)
        return verdict

    return retried(attempt)


@contextlib.contextmanager
def _reference(ev: Evaluation, config: EvalConfig, use_cache: bool):
    """The task's reference store entry, or inputs for this evaluation alone where the store
    cannot be used (asked not to, or the sandbox cannot hide its reference outputs)."""
    if not (use_cache and isolation().hides_paths):
        yield None, ephemeral_entry(ev.dir)
        return
    store = ReferenceStore()
    seeds = reference_seeds(verification_seeds(config.seeds))
    with store.using(store_key(ev.task.hash, config, seeds)) as entry:
        yield store, entry


def _evaluate(ev: Evaluation, store: ReferenceStore | None, entry: RefEntry, adapter) -> Verdict:
    config = ev.config
    seeds = verification_seeds(config.seeds)
    where = {
        "inputs_dir": str(entry.inputs_dir),
        "expected_dir": str(entry.expected_dir) if entry.expected_dir else None,
        "pool_seeds": pool_seeds(seeds),
    }
    # The judge and the candidate start now, so their start-ups overlap the reference's build;
    # each waits on its stdin until the parent lets it go.
    judge_pending = ev.start("judge", {}, private=ev.base_spec())
    hidden = {"hide": (store.expected_root,), "read_only": (store.inputs_root,)} if store else {}
    settings = ev.settings(adapter.child_env(config.device), **hidden)
    cand_pending = ev.start_candidate({**_candidate_spec(ev, seeds), **where}, settings)
    meta = entry.meta()
    if meta is None:
        try:
            prep = ev.worker(
                "prepare",
                {"seeds": reference_seeds(seeds), "validate": True, **where},
                private=ev.base_spec(),
            )
        except InfraFailure as exc:
            if store is not None and exc.disk_bytes:
                store.make_room(entry.key, exc.disk_bytes)  # the retry finds the room
            raise
        if not entry.inputs_dir.is_dir():
            raise InfraFailure("the reference store's entry was removed while it was being built")
        meta = {**prepare_meta(prep, ev.task), "reference_build_s": round(prep.process.wall_s, 3)}
        entry.seal(meta)
        if store is not None:
            store.evict(entry.key, store.budget_bytes())
    else:
        meta = {**meta, "reference_cached": True}
    ev.phases["parent.waiting_for_cleanup"] = round(JANITOR.wait(), 3)  # nothing freed while timed
    ev.phases["parent.before_go"] = round(time.monotonic() - ev.created, 3)
    where["updated_buffers"] = meta.get("updated_buffers", [])  # for the judge's go, too
    ev.go(
        cand_pending,
        {"training": meta.get("training", True), "updated_buffers": where["updated_buffers"]},
    )
    cand = ev.finish(cand_pending)
    candidate_done = time.monotonic()
    baselines = _baselines_to_time(config, entry)
    if not baselines:  # nothing is timed from here on: the next worker may start up beside it
        ev.start_next_candidate(settings)
    judge = None
    report = cand.result or {}
    if report.get("status") == "ok" and report.get("outputs"):
        judge = _judge(ev, judge_pending, entry, report, where, cand_pending.home, baselines)
        ev.phases["parent.candidate_to_judge"] = round(judge_pending.started - candidate_done, 3)
    if baselines:
        ev.start_next_candidate(settings)
    verdict = assemble(config, adapter, meta, cand, judge)
    verdict.phases_s = dict(ev.phases)
    verdict.memory = _memory(ev, meta, report, judge)
    verdict.reference = {
        "stored": entry.persistent,  # kept in the reference store for later candidates
        "cached": bool(meta.get("reference_cached")),  # built by an earlier evaluation
        "build_s": meta.get("reference_build_s"),
    }
    if contended_rejection(verdict):
        raise InfraFailure(verdict.message, busy=True, fallback=verdict)
    return verdict


def _wanted_baselines(config: EvalConfig) -> list[str]:
    return (["eager", "compile"] if config.baseline_compile else ["eager"]) * config.profile


def _baselines_to_time(config: EvalConfig, entry: RefEntry) -> list[str]:
    """The baselines this evaluation's judge must time: those the store does not have yet."""
    return [name for name in _wanted_baselines(config) if name not in entry.baselines()]


def _judge(ev: Evaluation, pending: PendingWorker, entry: RefEntry, report: dict, where: dict,
           candidate_dir: Path, baselines: list[str]):  # fmt: skip
    """Let the judge compare, and time only the `baselines` the store does not have yet."""
    wanted = _wanted_baselines(ev.config)
    stored = {name: entry.baselines()[name] for name in wanted if name not in baselines}
    go = {
        "candidate_dir": str(candidate_dir),
        "outputs": report["outputs"],
        "timing_output": report.get("timing_output"),
        "timing_output_seed": report.get("timing_output_seed"),
        "buffers": report.get("buffers", {}),
        "baselines": baselines,
        **where,
    }
    ev.go(pending, go)
    judge = ev.finish(pending)
    result = judge.result
    if result is None or "error" in result or "task_error" in result:
        raise TaskError(_judge_failure(judge))
    measured = {name: result[name] for name in go["baselines"] if name in result}
    if measured:
        entry.add_baselines({**measured, "peaks": result.get("peaks")})
    if stored:
        result.update(stored, baseline_cached=True)
        result.setdefault("peaks", entry.baselines().get("peaks"))
    return judge


def _memory(ev: Evaluation, meta: dict, report: dict, judge) -> dict:
    """Peak host memory per worker (measured by the parent) and peak device memory."""
    return {
        "host_limit_bytes": ev.host_limit,
        "peak_host_bytes": dict(ev.peaks),
        "peak_device_bytes": {
            "reference": meta.get("peak_device_bytes"),
            "candidate": report.get("peak_device_bytes"),  # the candidate's own claim
            "judge": (judge.result or {}).get("peak_device_bytes") if judge else None,
        },
    }


def _candidate_spec(ev: Evaluation, seeds: list[int]) -> dict:
    """This evaluation's part of the candidate's spec, sent through its stdin."""
    config = ev.config
    return {
        "kernel": str(ev.kernel.resolve()),
        "policy": config.policy,
        "seeds": seeds,
        "profile": config.profile,
        "share_weights": config.share_weights,
    }


def _judge_failure(judge: WorkerRun) -> str:
    result = judge.result or {}
    return result.get("task_error") or (
        "the judge process failed, which is a kernelgraph or task problem, not the "
        f"candidate's: {result.get('error') or judge.process.log_tail[-1500:]}"
    )


def _check_config(config: EvalConfig):
    from kernelgraph.tools.harness.config import POLICIES, PRECISIONS

    try:
        adapter = get_adapter(config.dsl)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from exc
    if config.device not in adapter.devices:
        raise UsageError(
            f"--dsl {config.dsl} runs on {', '.join(adapter.devices)}, not on {config.device}."
        )
    if config.precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}")
    if config.policy not in POLICIES:
        raise UsageError(f"--policy must be one of {', '.join(POLICIES)}")
    if config.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    return adapter
