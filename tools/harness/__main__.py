"""`python -m kernelgraph.tools.harness`: JSON in, JSON out, on a bare GPU box (stdlib + torch only).

    python -m kernelgraph.tools.harness < request.json      # or: python -m kernelgraph.tools.harness request.json
    {"task": "t.py", "kernel": "k.py", "config": {"dsl": "triton", "device": "cuda", ...}}

Prints one JSON line (the verdict, or {"error": ...}). Exit code 0 passed, 1 other verdicts,
2 bad request or invalid task.
"""

from __future__ import annotations

import json
import sys

from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.harness.verdict import TaskError, UsageError


def main(argv: list[str]) -> int:
    try:
        text = open(argv[0]).read() if argv else sys.stdin.read()
        request = json.loads(text)
        config = EvalConfig(**request["config"])
        verdict = evaluate(
            request["task"], request["kernel"], config, use_cache=request.get("cache", True)
        )
    except (TaskError, UsageError) as exc:
        print(json.dumps({"error": str(exc), "kind": type(exc).__name__}))
        return 2
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(json.dumps({"error": f"bad request: {exc}", "kind": "UsageError"}))
        return 2
    print(json.dumps(verdict.to_dict(), default=repr))
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
