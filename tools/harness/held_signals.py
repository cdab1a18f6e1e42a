"""Ctrl-C and SIGTERM held while a worker is forked. Standard library only.

`subprocess.Popen` with a `preexec_fn` runs Python's at-fork hooks in the parent (logging
registers one). A SIGINT that lands then raises KeyboardInterrupt inside the hook, where Python
prints "Exception ignored" and drops it: the user's Ctrl-C is lost and the run goes on. Inside
`held()`, such a signal is only recorded, and raised again once the child has started.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Record SIGINT/SIGTERM inside; deliver them to their own handlers on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield  # Python runs signal handlers in the main thread only: nothing to hold here
        return
    caught: list[int] = []
    previous = {s: signal.getsignal(s) for s in HELD}
    held_here = [s for s, handler in previous.items() if handler is not None]
    for signum in held_here:
        signal.signal(signum, lambda number, frame: caught.append(number))
    try:
        yield
    finally:
        for signum in held_here:
            signal.signal(signum, previous[signum])
        for signum in caught:
            signal.raise_signal(signum)  # its own handler now: KeyboardInterrupt, exit, ...
