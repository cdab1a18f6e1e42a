"""Where kernelgraph keeps its caches, and the evaluation cache. Standard library only.

An evaluation is keyed by (code hash, task hash, harness config); asking again returns the
stored verdict without running anything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from kernelgraph.tools.harness.exchange import write_json


def cache_root() -> Path:
    root = os.environ.get("KERNELGRAPH_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "kernelgraph"
    path.mkdir(parents=True, exist_ok=True)
    return path


BUILD_CACHES = {  # each tool's own variable, and its folder under the cache root
    "KERNELGRAPH_BUILD_CACHE": "build",
    "TRITON_CACHE_DIR": "triton",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
}


def shared_build_env() -> dict[str, str]:
    """Build caches shared by all workers (keyed by source hash by their own tools): where the
    user pointed one, there; else under the cache root."""
    root = cache_root()
    return {
        "KERNELGRAPH_CACHE_DIR": str(root),
        **{name: os.environ.get(name) or str(root / sub) for name, sub in BUILD_CACHES.items()},
    }


class EvalCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or cache_root()) / "evals"
        self.root.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict | None:
        try:
            return json.loads((self.root / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None

    def put(self, key: str, verdict: dict) -> None:
        write_json(self.root / f"{key}.json", verdict)
