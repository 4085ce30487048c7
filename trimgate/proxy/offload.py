"""CPU work on a large body, off the event loop.

Examining a chat body (inflate, parse, plan, encode) costs about 2-5 ms per MB; a retry's
replan costs the same again. Done on the event loop, one multi-MB history holds up every
other request of the process for that long, and a few of them queue behind each other.
Bodies over ``INLINE_BYTES`` (and every compressed body, whatever it inflates to) are
therefore examined and replanned in a small pool of worker threads; small ones stay on the
loop, where a thread hop would cost more than the work. One call into the JSON parser still
holds the GIL for its whole length (about 2.5 ms per MB), which bounds what a thread can
give back; bench/loop_stall.py measures what is left. Bodies of very many small objects,
where that is tens of milliseconds, go to a worker process instead (``isolation``,
proxy/isolate.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from trimgate.proxy.isolate import Isolation

INLINE_BYTES: Final = 256 * 1024  # bodies up to this size are worked on the loop
THREADS: Final = 2

T = TypeVar("T")


def heavy(body: bytes, compressed: bool) -> bool:
    """Work on this body goes to a thread."""
    return compressed or len(body) > INLINE_BYTES


class Offload:
    """The worker threads, started on first use."""

    __slots__ = ("_executor", "isolation")

    def __init__(self, isolation: Isolation | None = None) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self.isolation = isolation  # the worker process for dense bodies; None: off

    async def run(self, off: bool, work: Callable[[], T]) -> T:
        """``work()``, in a worker thread when ``off``."""
        if not off:
            return work()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(THREADS, "trimgate-examine")
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    def close(self) -> None:
        """Stop the threads (the caller stops ``isolation``: that needs the loop)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
