"""Wall time per stage of a worker, for the overhead breakdown. Standard library only."""

from __future__ import annotations

import contextlib
import time


class Stopwatch:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 4)


watch = Stopwatch()  # one per worker process
