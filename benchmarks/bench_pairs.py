"""The verified kernels of a `kernelgraph bench` folder as pairs for KernelBench's own evaluator.

    python benchmarks/bench_pairs.py BENCH_DIR OUT_DIR [--only GLOBS]
    python benchmarks/kernelbench_agreement.py --kernelbench-src KB_SRC \\
        --pairs OUT_DIR/pairs.jsonl --out OUT_DIR/agree.jsonl

Writes each verified problem's best kernel to OUT_DIR/<level>_<stem>.py (exported from the
run store, as `kernelgraph export` does) and one pair per line to OUT_DIR/pairs.jsonl.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from pathlib import Path

from kernelgraph.graph.bench.api import load_bench
from kernelgraph.graph.inspect import export


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bench", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", default="*", help="comma-separated globs over problem names")
    args = parser.parse_args()
    outcome = load_bench(args.bench)
    paths = {p.name: p.path for p in outcome.manifest.problems}
    globs = [g.strip() for g in args.only.split(",") if g.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    for result in outcome.results:
        if not result.verified or not any(fnmatch.fnmatch(result.problem, g) for g in globs):
            continue
        kernel = args.out / (result.problem.replace("/", "_") + ".py")
        export(result.run_id, kernel, db=outcome.manifest.db)
        pair = {"problem": paths[result.problem], "kernel": str(kernel),
                "dsl": outcome.manifest.settings.dsl, "ours": True}  # fmt: skip
        lines.append(json.dumps(pair))
    (args.out / "pairs.jsonl").write_text("".join(line + "\n" for line in lines))
    print(f"{len(lines)} pairs in {args.out / 'pairs.jsonl'}")


if __name__ == "__main__":
    main()
