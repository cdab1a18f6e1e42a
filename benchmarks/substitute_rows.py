"""A level's geomean vs eager with some problems' rows replaced by later measurements.

A full bench costs more device time than a change to a few problems' kernels does. This
script takes a bench's `results.jsonl`, then later files in order, the later row of a problem
winning. It prints the geomean over all problems, an unverified problem counted as 1.0x, and
the problems still below eager. The result is an estimate, not a bench: the rows come from
different runs. Three row formats are read:

- a bench's rows (`problem`, `verified`, `speedup_vs_eager`);
- a harness judgement (`problem`, `status`, `vs_eager`);
- `kernel_file_probe.py` rows (`task`, `round`, `variant`, `ms`): the last round's
  eager ms over VARIANT's (`--variant`, default "new"), for tasks named like "4_Conv2d_...".

    python benchmarks/substitute_rows.py BENCH/results.jsonl LATER.jsonl ... --level level2 \\
        [--skip 12,76] [--exclude 1,3]

`--skip` drops those problems' later rows (they measured code that did not stay);
`--exclude` leaves problems out of the geomean (e.g. withheld-style ones).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def _rows(path: Path, level: str, variant: str) -> dict[str, float]:
    found: dict[str, float] = {}
    probes: dict[str, dict[str, tuple[int, float]]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "speedup_vs_eager" in row:
            found[_key(row["problem"])] = row["speedup_vs_eager"] if row["verified"] else 1.0
        elif "status" in row:
            found[_key(row["problem"])] = row.get("vs_eager") or 1.0
        elif "round" in row:
            times = probes.setdefault(f"{level}/{_key(row['task'])}", {})
            if row["round"] >= times.get(row["variant"], (-1, 0.0))[0]:
                times[row["variant"]] = (row["round"], row["ms"])
    for problem, times in probes.items():
        if variant in times:
            found[problem] = times["eager"][1] / times[variant][1]
    return found


def _key(name: str) -> str:
    """'level2/4_Conv2d_Mish_Mish' -> 'level2/4'; '4_Conv2d_Mish_Mish' -> '4'."""
    return name.split("_")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--level", default="level2")
    parser.add_argument("--variant", default="new")
    parser.add_argument("--skip", default="",
                        help="problem numbers whose later rows are ignored: they measured code "
                        "that did not stay")  # fmt: skip
    parser.add_argument("--exclude", default="", help="problem numbers left out of the geomean")
    args = parser.parse_args()
    numbers = lambda text: {f"{args.level}/{n}" for n in text.split(",") if n}  # noqa: E731
    skip, exclude = numbers(args.skip), numbers(args.exclude)
    speedups = _rows(args.files[0], args.level, args.variant)
    for path in args.files[1:]:
        later = _rows(path, args.level, args.variant)
        speedups |= {p: s for p, s in later.items() if p in speedups and p not in skip}
    kept = {p: s for p, s in speedups.items() if p not in exclude}
    geomean = math.exp(sum(math.log(s) for s in kept.values()) / len(kept))
    below = sorted((p, round(s, 2)) for p, s in kept.items() if s < 1)
    print(json.dumps({"problems": len(kept), "geomean_vs_eager": round(geomean, 3),
                      "below_eager": below}))  # fmt: skip


if __name__ == "__main__":
    main()
