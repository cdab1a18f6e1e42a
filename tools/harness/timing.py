"""The timer: the same loop for candidates and baselines. Standard library and torch only.

GPU: warm-up; before every iteration, outside the timed region, the inputs are refreshed from a
pool (so a cache keyed on input buffers returns stale results, which the judge then sees) and
L2 is flushed; CUDA events bracket the call and a device-wide synchronize ends each timed
region, so work left on a side stream is still counted. CPU: the same loop with a wall clock.
Reported: median, interquartile spread, iterations and the loop's own wall time (so a parent can
check the claimed times against a clock it trusts).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

UNSTABLE_SPREAD_PCT = 5.0
SIDE_STREAM_GAP_MS = 0.05


@dataclass
class TimingResult:
    median_ms: float
    spread_pct: float
    iterations: int
    wall_ms: float
    timer: str
    stable: bool
    samples_ms: list[float]
    side_stream_suspected: bool = False
    total_ms: float = 0.0  # the timed regions summed: a parent checks it against its own clock

    def to_dict(self) -> dict:
        return asdict(self)


class _Flusher:
    """Overwrites a buffer twice the size of L2, so each iteration starts with a cold cache."""

    def __init__(self, device: str) -> None:
        self.buffer = None
        if device == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
            self.buffer = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.zero_()


def refresh_inputs(live: Sequence, pool: Sequence[Sequence], index: int) -> None:
    """Copy pool[index] into the live input tensors in place."""
    for dst, src in zip(live, pool[index % len(pool)], strict=True):
        if isinstance(dst, torch.Tensor):
            dst.copy_(src)


def time_loop(
    call: Callable[[], object],
    live_inputs: Sequence,
    pool: Sequence[Sequence],
    device: str,
    *,
    budget_ms: float = 1500.0,
    min_iters: int = 10,
    max_iters: int = 500,
    warmup_ms: float = 100.0,
) -> tuple[TimingResult, object]:
    """Time `call()`; returns the timing and the output of the last call.

    The iteration count is even and the pool alternates, so the last call sees different
    contents than the first.
    """
    cuda = device == "cuda"
    flush = _Flusher(device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    # Warm-up: also estimates the per-call time to size the timed loop.
    warm_start = time.perf_counter()
    warm_calls = 0
    while warm_calls < 3 or (time.perf_counter() - warm_start) * 1e3 < warmup_ms:
        refresh_inputs(live_inputs, pool, warm_calls)
        call()
        sync()
        warm_calls += 1
        if warm_calls >= 1000:
            break
    per_call_ms = max((time.perf_counter() - warm_start) * 1e3 / warm_calls, 1e-3)
    iters = int(min(max(budget_ms / per_call_ms, min_iters), max_iters))
    iters += iters % 2

    samples: list[float] = []
    device_samples: list[float] = []
    output = None
    loop_start = time.perf_counter()
    for i in range(iters):
        refresh_inputs(live_inputs, pool, i)
        flush()
        if cuda:
            # No sync here: the flush and a short GPU-side spin run on the same stream first,
            # so the call starts cold and the host's launch latency is hidden (as in do_bench);
            # host gaps *between* the call's own launches are still timed.
            _spin()
            start, stream_end, device_end = (torch.cuda.Event(enable_timing=True) for _ in "abc")
            start.record()
            output = call()
            stream_end.record()
            torch.cuda.synchronize()  # device-wide: waits for work on any stream
            device_end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(stream_end))
            device_samples.append(start.elapsed_time(device_end))
        else:
            sync()
            t0 = time.perf_counter()
            output = call()
            samples.append((time.perf_counter() - t0) * 1e3)
    wall_ms = (time.perf_counter() - loop_start) * 1e3
    side_stream = _left_work_running(samples, device_samples)
    if side_stream:  # time what the device really did, and let the verdict say why
        samples = device_samples
    median = statistics.median(samples)
    spread = _iqr_pct(samples, median)
    result = TimingResult(
        median_ms=median,
        spread_pct=spread,
        iterations=iters,
        wall_ms=wall_ms,
        timer="cuda_events" if cuda else "wall_clock",
        stable=spread <= UNSTABLE_SPREAD_PCT,
        samples_ms=samples,
        side_stream_suspected=side_stream,
        total_ms=sum(samples),
    )
    return result, output


def _left_work_running(stream_ms: list[float], device_ms: list[float]) -> bool:
    """True when the device stayed busy well after the caller's stream finished the call.

    The gap between the two is normally the host's wake-up after a synchronize (microseconds);
    work hidden on another stream shows up as a gap as long as that work.
    """
    if not device_ms:
        return False
    stream, device = statistics.median(stream_ms), statistics.median(device_ms)
    return device - stream > max(SIDE_STREAM_GAP_MS, 0.25 * stream)


def _spin(cycles: int = 400_000) -> None:
    """Keep the GPU busy ~0.2 ms so the start event and the launch are queued before they run."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(cycles)


def _iqr_pct(samples: list[float], median: float) -> float:
    if len(samples) < 4 or median <= 0:
        return 0.0
    q = statistics.quantiles(samples, n=4)
    return 100.0 * (q[2] - q[0]) / median
