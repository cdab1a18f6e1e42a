"""Agreement with KernelBench's own evaluator on kernels kernelgraph already judged.

    python benchmarks/kernelbench_agreement.py --kernelbench-src scratch/kb \\
        --pairs PAIRS.jsonl --out OUT.jsonl [--trials 5] [--timeout 600] [--device 0]

PAIRS.jsonl holds one JSON object per line:

    {"problem": "<KernelBench problem .py>", "kernel": "<kernel .py defining ModelNew>",
     "dsl": "triton" | "cuda" | "cpp" | ..., "ours": true | false}

``ours`` is kernelgraph's verdict.  Relative paths are resolved against the current
directory first, then against the folder holding PAIRS.jsonl.

--kernelbench-src is a folder holding KernelBench's ``kernelbench`` package (at least
``kernelbench/eval.py`` and the modules it imports) and optionally ``stubs/`` with
stand-ins for packages the GPU box lacks (e.g. pydantic).  KernelBench's code is
never part of this repository: it is imported only at run time, inside the worker.
The stubs folder is appended to sys.path only when one of the modules it stands in
for cannot be found, so real packages always win.

Every pair runs in a fresh subprocess (a crashing or hanging kernel cannot take this
script down) that calls ``kernelbench.eval.eval_kernel_against_ref`` with
seed_num=42, num_correct_trials=--trials, measure_performance=False,
backend="triton" for triton kernels and "cuda" otherwise, precision=torch.float32,
device=--device and a fresh temporary build_dir.  Keyword arguments the fetched
eval.py does not accept are dropped (and recorded as ``dropped_kwargs``).

Each result is appended to OUT.jsonl as soon as it finishes; pairs already in
OUT.jsonl (same problem and kernel strings) are skipped, so a run can be resumed
(delete a pair's line from OUT.jsonl to run it again).
Progress goes to stderr; the summary goes to stdout; exit status 0 once all pairs
have a record.  Stdlib only in this process; the worker also needs torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

WORKER_FLAG = "--_worker"
STUBBED_MODULES = ("pydantic", "requests")
LOG_TAIL_CHARS = 4000
ERROR_CHARS = 2000


class UsageError(Exception):
    """A problem with the command line or input files, reported without a traceback."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def backend_for(dsl: str) -> str:
    return "triton" if str(dsl).strip().lower() == "triton" else "cuda"


# --------------------------------------------------------------------------- worker


def _jsonable(value, depth: int = 0):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if depth > 8:
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return str(value)


def _error_from_metadata(metadata: dict) -> str | None:
    parts = []
    for key in (
        "compilation_error_name",
        "compilation_error",
        "runtime_error_name",
        "runtime_error",
        "correctness_issue",
        "max_difference",
        "avg_difference",
        "correctness_trials",
    ):
        if key in metadata:
            parts.append(f"{key}: {metadata[key]}")
    if not any(k in metadata for k in ("compilation_error", "runtime_error", "correctness_issue")):
        return None
    return "; ".join(parts)[:ERROR_CHARS]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _prepare_sys_path(kb_src: str) -> list[str]:
    """Put KernelBench first on sys.path; add stubs last, only for missing modules."""
    sys.path.insert(0, kb_src)
    missing = [m for m in STUBBED_MODULES if not _importable(m)]
    stubs = os.path.join(kb_src, "stubs")
    if missing and os.path.isdir(stubs):
        sys.path.append(stubs)
    return missing


def run_worker(job_path: str, result_path: str) -> int:
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    result: dict = {"kernelbench_compiled": None, "kernelbench_correct": None, "error": None}
    try:
        result["stubbed"] = _prepare_sys_path(job["kernelbench_src"])
        import kernelbench.eval as kb_eval
        import torch

        result["kernelbench_eval_file"] = kb_eval.__file__
        fn = kb_eval.eval_kernel_against_ref
        params = inspect.signature(fn).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        wanted = {
            "original_model_src": job["problem_src"],
            "custom_model_src": job["kernel_src"],
            "seed_num": job["seed"],
            "num_correct_trials": job["trials"],
            "measure_performance": False,
            "verbose": False,
            "backend": job["backend"],
            "precision": torch.float32,
            "device": job["device"],
            "build_dir": job["build_dir"],
        }
        kwargs = {k: v for k, v in wanted.items() if takes_any or k in params}
        result["dropped_kwargs"] = sorted(set(wanted) - set(kwargs))
        for required in ("original_model_src", "custom_model_src"):
            if required not in kwargs:
                raise TypeError(f"eval_kernel_against_ref has no parameter {required!r}")

        exec_result = fn(**kwargs)

        if exec_result is None:
            result["error"] = (
                "eval_kernel_against_ref returned None (KernelBench's answer for a "
                "lock-file / missing-file error during compilation: retry)"
            )
        else:
            metadata = _jsonable(getattr(exec_result, "metadata", {}) or {})
            result["kernelbench_compiled"] = bool(exec_result.compiled)
            result["kernelbench_correct"] = bool(exec_result.correctness)
            result["kernelbench_metadata"] = metadata
            result["error"] = _error_from_metadata(metadata)
            if not exec_result.correctness and "runtime_error" in metadata:
                result["kernelbench_reference_error"] = _reference_error(kb_eval, job)
    except BaseException as exc:  # report everything, SystemExit included
        traceback.print_exc()
        result["error"] = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
    finally:
        tmp = result_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(_jsonable(result), f)
        os.replace(tmp, result_path)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


def _reference_error(kb_eval, job: dict) -> str | None:
    """KernelBench's reference alone, on inputs its evaluator prepares: the error if it fails
    (its evaluator casts every input tensor to float32, class labels included)."""
    import torch

    try:
        context: dict = {}
        model_cls, get_init_inputs, get_inputs = kb_eval.load_original_model_and_inputs(
            job["problem_src"], context
        )
        device = torch.device(f"cuda:{job['device']}")
        prepare = kb_eval._process_input_tensor  # the evaluator's own input handling
        kb_eval.set_seed(job["seed"])
        init = [prepare(x, device, job["backend"], torch.float32) for x in get_init_inputs()]
        kb_eval.set_seed(job["seed"])
        model = model_cls(*init).to(device=device, dtype=torch.float32)
        inputs = [prepare(x, device, job["backend"], torch.float32) for x in get_inputs()]
        with torch.no_grad():
            model(*inputs)
        torch.cuda.synchronize(device)
    except Exception as exc:  # noqa: BLE001 - any failure of the reference is the answer
        return f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
    return None


# --------------------------------------------------------------------------- parent


def _resolve(path_text: str, pairs_dir: Path) -> Path:
    path = Path(path_text).expanduser()
    if path.is_absolute() or path.exists():
        return path
    alt = pairs_dir / path
    return alt if alt.exists() else path


def load_pairs(pairs_path: Path) -> list[dict]:
    if not pairs_path.is_file():
        raise UsageError(f"--pairs {pairs_path}: no such file")
    pairs, seen = [], set()
    for lineno, line in enumerate(pairs_path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{pairs_path}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{pairs_path}:{lineno}: expected a JSON object")
        missing = [k for k in ("problem", "kernel", "ours") if k not in obj]
        if missing:
            raise UsageError(f"{pairs_path}:{lineno}: missing field(s) {', '.join(missing)}")
        if not isinstance(obj["ours"], bool):
            raise UsageError(f"{pairs_path}:{lineno}: 'ours' must be true or false")
        key = (str(obj["problem"]), str(obj["kernel"]))
        if key in seen:
            progress(f"warning: {pairs_path}:{lineno}: duplicate pair ignored: {key[1]}")
            continue
        seen.add(key)
        pairs.append(
            {
                "problem": key[0],
                "kernel": key[1],
                "dsl": str(obj.get("dsl", "cuda")),
                "ours": obj["ours"],
            }
        )
    return pairs


def load_done(out_path: Path) -> dict[tuple[str, str], dict]:
    done: dict[tuple[str, str], dict] = {}
    if not out_path.exists():
        return done
    for line in out_path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # e.g. a line cut short by an earlier crash: that pair is redone
        if isinstance(rec, dict) and "problem" in rec and "kernel" in rec:
            done[(str(rec["problem"]), str(rec["kernel"]))] = rec
    return done


def append_record(out_path: Path, record: dict) -> None:
    out_path.parent.mkdir(parents=True, exist_ok=True)
    needs_newline = out_path.exists() and out_path.stat().st_size > 0
    if needs_newline:
        with open(out_path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            needs_newline = f.read(1) != b"\n"
    with open(out_path, "a", encoding="utf-8") as f:
        if needs_newline:
            f.write("\n")
        f.write(json.dumps(record) + "\n")
        f.flush()


def _tail(path: Path, limit: int = LOG_TAIL_CHARS) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-limit:]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def evaluate_pair(pair: dict, args: argparse.Namespace, pairs_dir: Path) -> dict:
    record = {
        "problem": pair["problem"],
        "kernel": pair["kernel"],
        "dsl": pair["dsl"],
        "backend": backend_for(pair["dsl"]),
        "ours": pair["ours"],
        "kernelbench_compiled": None,
        "kernelbench_correct": None,
        "agree": False,
        "error": None,
        "seconds": 0.0,
    }
    start = time.monotonic()
    try:
        problem_src = _resolve(pair["problem"], pairs_dir).read_text(encoding="utf-8")
        kernel_src = _resolve(pair["kernel"], pairs_dir).read_text(encoding="utf-8")
    except OSError as exc:
        record["error"] = f"cannot read input: {exc}"
        return record

    workdir = Path(tempfile.mkdtemp(prefix="kb_agree_"))
    build_dir = workdir / "build"
    build_dir.mkdir()
    job_path, result_path, log_path = (
        workdir / "job.json",
        workdir / "result.json",
        workdir / "worker.log",
    )
    job_path.write_text(
        json.dumps(
            {
                "kernelbench_src": str(args.kernelbench_src.resolve()),
                "problem_src": problem_src,
                "kernel_src": kernel_src,
                "backend": record["backend"],
                "trials": args.trials,
                "seed": args.seed,
                "device": args.device,
                "build_dir": str(build_dir),
            }
        ),
        encoding="utf-8",
    )
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), WORKER_FLAG, str(job_path)]
    cmd.append(str(result_path))
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            try:
                proc.wait(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                record["error"] = f"timeout: worker killed after {args.timeout}s"
            except BaseException:
                _kill_group(proc)
                raise
        if record["error"] is None:
            if result_path.exists():
                result = json.loads(result_path.read_text(encoding="utf-8"))
                for key in ("kernelbench_compiled", "kernelbench_correct", "error"):
                    record[key] = result.get(key)
                for key in (
                    "kernelbench_metadata",
                    "dropped_kwargs",
                    "stubbed",
                    "kernelbench_reference_error",
                ):
                    if result.get(key):
                        record[key] = result[key]
            else:
                rc = proc.returncode
                how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
                record["error"] = f"worker died ({how}) before reporting a result"
        if record["error"] is not None and record["kernelbench_correct"] is not True:
            record["log_tail"] = _tail(log_path)
    finally:
        record["seconds"] = round(time.monotonic() - start, 2)
        shutil.rmtree(workdir, ignore_errors=True)
    record["agree"] = record["ours"] == record["kernelbench_correct"]
    return record


def summarize(pairs: list[dict], records: dict[tuple[str, str], dict]) -> None:
    rows = [records[(p["problem"], p["kernel"])] for p in pairs]
    agree = sum(1 for r in rows if r.get("agree") is True)
    unrunnable = [r for r in rows if r.get("kernelbench_reference_error")]
    no_verdict = [r for r in rows if r.get("kernelbench_correct") is None]
    disagree = len(rows) - agree - len(unrunnable)
    print(
        f"KernelBench agreement: {len(rows)} pairs, {agree} agree, {disagree} disagree, "
        f"{len(unrunnable)} where KernelBench's evaluator cannot run its own reference"
    )
    if no_verdict:
        print(f"  of which {len(no_verdict)} got no KernelBench verdict (error/timeout)")
    for r in unrunnable:
        print(
            f"  reference fails under KernelBench: {r['problem']}  [{r['kernelbench_reference_error'][:160]}]"
        )
    disagreements = [r for r in rows if r.get("agree") is not True and r not in unrunnable]
    if disagreements:
        print("disagreements:")
    for r in disagreements:
        theirs = r.get("kernelbench_correct")
        detail = f"  [{r['error'].splitlines()[0][:200]}]" if r.get("error") else ""
        print(
            f"  ours={r['ours']} kernelbench={theirs} compiled={r.get('kernelbench_compiled')}"
            f"  {r['problem']} :: {r['kernel']}{detail}"
        )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run KernelBench's eval_kernel_against_ref on kernels kernelgraph "
        "judged and report where the verdicts agree."
    )
    parser.add_argument(
        "--kernelbench-src",
        type=Path,
        required=True,
        help="folder holding kernelbench/eval.py (and optional stubs/)",
    )
    parser.add_argument("--pairs", type=Path, required=True, help="JSONL of pairs to check")
    parser.add_argument("--out", type=Path, required=True, help="JSONL results (appended)")
    parser.add_argument("--trials", type=int, default=5, help="num_correct_trials (default 5)")
    parser.add_argument(
        "--timeout", type=float, default=600, help="seconds per pair before the worker is killed"
    )
    parser.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    parser.add_argument("--seed", type=int, default=42, help="seed_num (default 42)")
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [WORKER_FLAG]:
        if len(argv) != 3:
            print("usage: kernelbench_agreement.py --_worker JOB.json RESULT.json", file=sys.stderr)
            return 2
        return run_worker(argv[1], argv[2])

    args = parse_args(argv)
    try:
        eval_py = args.kernelbench_src / "kernelbench" / "eval.py"
        if not eval_py.is_file():
            raise UsageError(
                f"--kernelbench-src {args.kernelbench_src}: no kernelbench/eval.py there "
                f"(expected the fetched KernelBench package at {eval_py})"
            )
        pairs = load_pairs(args.pairs)
        done = load_done(args.out)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    todo = [p for p in pairs if (p["problem"], p["kernel"]) not in done]
    progress(
        f"{len(pairs)} pairs, {len(pairs) - len(todo)} already in {args.out}, {len(todo)} to run"
    )
    pairs_dir = args.pairs.resolve().parent
    try:
        for i, pair in enumerate(todo, 1):
            progress(f"[{i}/{len(todo)}] {pair['kernel']} ({pair['dsl']}) vs {pair['problem']}")
            record = evaluate_pair(pair, args, pairs_dir)
            append_record(args.out, record)
            done[(pair["problem"], pair["kernel"])] = record
            status = "AGREE" if record["agree"] else "DISAGREE"
            err = f" error={record['error'].splitlines()[0][:160]!r}" if record["error"] else ""
            progress(
                f"    {status} ours={record['ours']} kb_compiled={record['kernelbench_compiled']}"
                f" kb_correct={record['kernelbench_correct']} ({record['seconds']}s){err}"
            )
    except KeyboardInterrupt:
        progress("interrupted; finished pairs are saved, rerun to resume")
        return 130

    summarize(pairs, done)
    return 0


if __name__ == "__main__":
    sys.exit(main())
