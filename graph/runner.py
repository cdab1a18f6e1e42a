"""Running the graph: start, resume, branch and review a run. Everything the CLI does is a
plain function here.

A run is a LangGraph thread (thread id = run id) checkpointed into the run store's SQLite file
with durability "sync": every finished node is on disk before the next starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.types import Command

from kernelgraph.graph.build import graph_kind
from kernelgraph.graph.error_stops import HANDLED, error_stop
from kernelgraph.graph.errors import RunError
from kernelgraph.graph.progress import Progress
from kernelgraph.graph.routes import why_stop
from kernelgraph.graph.summary import FINISHED, STOP_MESSAGES, BestKernel, RunSummary, Spend
from kernelgraph.nodes.brain import make_brain
from kernelgraph.nodes.context import RunContext, eval_cache_for
from kernelgraph.nodes.llm import ModelConfigError
from kernelgraph.nodes.prebuild import Prebuilder
from kernelgraph.state import run_lock
from kernelgraph.state.checkpoint import open_checkpointer
from kernelgraph.state.config import RunConfig
from kernelgraph.state.graph_state import GraphState
from kernelgraph.state.store import RunStore, open_store
from kernelgraph.tools.dsl import get_adapter
from kernelgraph.tools.harness.config import POLICIES, PRECISIONS
from kernelgraph.tools.harness.stopping import STOPPING, stop_workers_on_signal
from kernelgraph.tools.harness.verdict import UsageError
from kernelgraph.tools.harness.warm import WARM_POOL
from kernelgraph.tools.task import TaskSource


def validate_config(config: RunConfig) -> None:
    """Reject bad settings before a run exists (UsageError / TaskError: exit code 2)."""
    validate_settings(config)
    TaskSource.read(config.task_path, config.sets)


def validate_settings(config: RunConfig, device_here: bool = True) -> None:
    """The settings alone, without the task: a DSL that exists and runs on the device, a known
    precision and policy; with `device_here`, a CUDA device on this machine."""
    try:
        adapter = get_adapter(config.dsl)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from exc
    if config.device not in adapter.devices:
        raise UsageError(
            f"--dsl {config.dsl} runs on {', '.join(adapter.devices)}, not on {config.device}."
        )
    if device_here and config.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: this machine has no CUDA device; use --device cpu.")
    if config.precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}")
    if config.policy not in POLICIES:
        raise UsageError(f"--policy must be one of {', '.join(POLICIES)}")
    search = config.search
    if search.islands > search.width:
        raise UsageError(
            f"--islands {search.islands} needs at least one lane each per round: give --width "
            f"{search.islands} or more."
        )
    if config.approve and search.parallel:
        raise UsageError(
            "--approve reviews one candidate at a time: use it without --width and --islands."
        )


def start(config: RunConfig, db: Path | None = None, progress: Progress | None = None,
          on_start: Callable[[str], None] | None = None) -> RunSummary:  # fmt: skip
    """A new run of the graph; `on_start` gets the run id before any work."""
    validate_config(config)
    store = open_store(db)
    run_id = new_run(store, config)
    if on_start:
        on_start(run_id)
    return drive(store, run_id, config, graph_kind(config.search).state(), progress)


def new_run(store: RunStore, config: RunConfig) -> str:
    """A run of a validated config in `store`, marked running; its id."""
    task = TaskSource.read(config.task_path, config.sets)
    run_id = store.create_run(
        kind="run",
        task_path=str(Path(config.task_path).resolve()),
        task_hash=task.hash,
        dsl=config.dsl,
        device=config.device,
        config=config.model_dump(mode="json"),
    )
    store.update_run(run_id, status="running")
    try:
        make_brain(config, store, run_id)  # a bad model setting leaves no run behind
    except ModelConfigError as exc:
        store.delete_run(run_id)
        raise RunError(str(exc)) from exc
    return run_id


def resume(run_id: str, db: Path | None = None, progress: Progress | None = None) -> RunSummary:
    """Continue a run after a crash, a kill or a stop. Evaluated candidates are not evaluated
    again (their verdicts are cached); a finished run is refused."""
    store, row, config = _open_run(run_id, db)
    if row["status"] == "task_error":
        raise RunError(
            f"run {run_id} ended on a task error, which resuming cannot mend: fix the task "
            f"file {config.task_path} (or shrink it with --set) and start a new run.",
        )
    if row["status"] in FINISHED:
        raise RunError(
            f"run {run_id} is finished ({row['status']}, {row['stop_reason']}). To go on, "
            f"branch it: kernelgraph branch {run_id} --from STEP --config max_iterations=N",
        )
    kind = graph_kind(config.search)
    app = kind.compile(open_checkpointer(store))
    snapshot = app.get_state(_thread(run_id))
    if snapshot.interrupts:
        return _summary(store, run_id, config, snapshot, None, None)
    start_input = kind.state() if not snapshot.values else None
    return drive(store, run_id, config, start_input, progress)


def review(run_id: str, decision: dict[str, Any], db: Path | None = None,
           progress: Progress | None = None) -> RunSummary:  # fmt: skip
    """Answer a run waiting at the verifier: approve, reject (feedback) or edit (kernel)."""
    store, row, config = _open_run(run_id, db)
    app = graph_kind(config.search).compile(open_checkpointer(store))
    if not app.get_state(_thread(run_id)).interrupts:
        raise RunError(f"run {run_id} is not waiting for approval (status {row['status']}).")
    return drive(store, run_id, config, Command(resume=decision), progress)


def approve(run_id: str, db=None, progress=None) -> RunSummary:
    return review(run_id, {"action": "approve"}, db, progress)


def reject(run_id: str, feedback: str, db=None, progress=None) -> RunSummary:
    return review(run_id, {"action": "reject", "feedback": feedback}, db, progress)


def edit(run_id: str, kernel: Path, db=None, progress=None) -> RunSummary:
    try:
        code = Path(kernel).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read kernel file {kernel}: {exc.strerror or exc}") from exc
    store = open_store(db)
    sha = store.put_blob(code, "code")
    return review(run_id, {"action": "edit", "code_sha": sha}, db, progress)


def _open_run(run_id: str, db: Path | None) -> tuple[RunStore, dict, RunConfig]:
    store = open_store(db)
    row = store.get_run(run_id)
    if row is None or row["kind"] != "run":
        raise RunError(f"no run {run_id!r} in {store.path}; `kernelgraph runs` lists them.")
    return store, row, RunConfig.model_validate(row["config"])


# A run ends by its own limits (iterations, rounds, budgets), never by LangGraph's step count,
# whose default differs between LangGraph versions.
RECURSION_LIMIT = 1_000_000


def _thread(run_id: str) -> dict:
    return {"configurable": {"thread_id": run_id}, "recursion_limit": RECURSION_LIMIT}


def drive(
    store: RunStore, run_id: str, config: RunConfig, graph_input, progress: Progress | None,
    app=None, thread: dict | None = None,
) -> RunSummary:  # fmt: skip
    """Run the graph on the run's thread in the store's checkpointer; or, given `app` and a
    node's `thread` (its config), as a subgraph of that node's graph (graph/studio.py)."""
    thread = thread or _thread(run_id)
    try:
        run_lock.acquire(store, run_id)
    except run_lock.RunLocked as exc:
        raise RunError(str(exc)) from exc
    started = time.monotonic()
    saved = 0.0
    try:
        brain = make_brain(config, store, run_id)
        row = store.get_run(run_id) or {}
        ctx = RunContext(
            config=config,
            store=store,
            run_id=run_id,
            brain=brain,
            artifacts=store.path.parent / run_id,
            eval_cache=eval_cache_for(config),
            on_event=progress.event if progress else (lambda node, text: None),
            active_s_before=row.get("active_s") or 0.0,
            started=started,
            prebuilder=Prebuilder(config.prebuild) if config.device.startswith("cuda") else None,
        )
        kind = graph_kind(config.search)
        app = app or kind.compile(open_checkpointer(store))
        store.update_run(run_id, status="running")
        error: BaseException | None = None
        try:
            # a signal kills the workers at once (a search's lanes evaluate on threads) and
            # marks the run stopping, which holds even where its KeyboardInterrupt is lost
            # (raised inside a finalizer, Python prints and drops it)
            with stop_workers_on_signal(), WARM_POOL.active():
                for update in app.stream(
                    graph_input, thread, context=ctx, stream_mode="updates", durability="sync"
                ):
                    now = time.monotonic()
                    store.add_active_seconds(run_id, now - started - saved)
                    saved = now - started
                    if progress is not None:
                        values = app.get_state(thread).values
                        for node in update:
                            if node in kind.nodes:
                                progress.step(node, as_state(values, kind.state), brain.spend())
            if STOPPING.is_set():
                raise KeyboardInterrupt("the run was stopped by a signal")
        except HANDLED as exc:
            error = exc
        snapshot = app.get_state(thread)
        return _summary(store, run_id, config, snapshot, ctx, error)
    except ModelConfigError as exc:
        store.update_run(run_id, status="interrupted", stop_reason="model_config")
        raise RunError(f"{exc} Then: kernelgraph resume {run_id}") from exc
    finally:
        store.add_active_seconds(run_id, time.monotonic() - started - saved)
        run_lock.release(store, run_id)


def as_state(values, cls: type[GraphState] = GraphState) -> GraphState:
    """A snapshot's values as the graph's state class (a fresh one for an empty snapshot)."""
    if isinstance(values, cls):
        return values
    return cls.model_validate(values) if values else cls()


def _summary(store, run_id, config, snapshot, ctx, error) -> RunSummary:
    state = as_state(snapshot.values, graph_kind(config.search).state)
    best = best_kernel(store, run_id, state)
    spend = Spend(**spend_of(store, run_id))
    exit_code = None
    if snapshot.interrupts:
        status, reason = "awaiting_approval", "awaiting_approval"
        cand = snapshot.interrupts[0].value.get("candidate_id")
        message = (
            f"candidate {cand} passed verification and waits for review: "
            f"kernelgraph show {run_id} --candidate {cand}; then kernelgraph approve {run_id}, "
            f"reject {run_id} --feedback TEXT, or edit {run_id} --kernel FILE"
        )
    elif error is not None:
        stop = error_stop(error, run_id)
        status, reason, message, exit_code = stop.status, stop.reason, stop.message, stop.exit_code
    elif snapshot.next:
        status, reason = "interrupted", "interrupted"
        message = f"the run stopped before {snapshot.next[0]}: kernelgraph resume {run_id}"
    else:
        reason = (why_stop(state, ctx) if ctx else None) or state.stop_reason or "done"
        status = "verified" if best else "no_verified_kernel"
        message = STOP_MESSAGES.get(reason, reason)
        if best is None:
            message += "; no candidate passed verification" + _last_failures(state)
            message += _tf32_hint(ctx, state) if ctx else ""
    store.update_run(run_id, status=status, stop_reason=reason)
    return RunSummary(
        run_id=run_id, status=status, stop_reason=reason, best=best, spend=spend,
        message=message, exit_code=exit_code,
    )  # fmt: skip


def _tf32_hint(ctx: RunContext, state: GraphState) -> str:
    """Why an accurate convolution can miss: under fp32 the reference ran with PyTorch's default
    flags, and cuDNN may have computed its convolutions in TF32 (KernelBench judges the same)."""
    config = ctx.config
    if not (PRECISIONS[config.precision].cudnn_tf32 and config.device.startswith("cuda")):
        return ""
    if not any(": incorrect:" in failure for failure in state.recent_failures):
        return ""
    ops = (ctx.get_json(state.analysis_sha) or {}).get("ops") or []
    if not any("convolution" in str(op.get("op", "")) for op in ops):
        return ""
    return (
        ". The reference ran with PyTorch's default flags, as KernelBench runs it: cuDNN may "
        "compute its convolutions in TF32, about 5e-4 off the exact result at large K. To "
        "match it, keep the convolution a library call (--policy hybrid); to be judged against "
        "the exact result, use --precision ieee"
    )


def _last_failures(state: GraphState) -> str:
    if not state.recent_failures:
        return ""
    return " (last: " + "; ".join(state.recent_failures[-3:]) + ")"


def best_kernel(store: RunStore, run_id: str, state: GraphState) -> BestKernel | None:
    """The best verified kernel, written to runs/<run>/best.py."""
    if state.best is None:
        return None
    row = store.get_candidate(state.best.candidate_id) or {}
    path = None
    if row.get("code") is not None:
        target = store.path.parent / run_id / "best.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(row["code"])
        path = str(target)
    return BestKernel(
        candidate_id=state.best.candidate_id,
        speedup_vs_eager=state.best.speedup_vs_eager,
        speedup_vs_compile=state.best.speedup_vs_compile,
        sol_pct=state.best.sol_pct,
        path=path,
    )


def spend_of(store: RunStore, run_id: str) -> dict:
    from kernelgraph.state.llm_calls import run_spend

    return run_spend(store, run_id)
