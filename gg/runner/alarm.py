"""One thread per runner process that calls short callbacks at given monotonic times.

A flight's lease keeper has nothing to do until its first renewal (or its lone `started`
report) is due, and most flights are over long before that. Instead of a thread per flight
that sleeps until then, each flight asks :data:`ALARM` to start its keeper at that moment
and cancels the request when it ends first (docs/performance.md, "The runner's own CPU a
flight"). Callbacks run on the alarm's thread, one after another, so each must be quick
(start a thread, set an event) and must not raise; one that raises is dropped and the alarm
goes on.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from typing import Callable


class Alarm:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._wake = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._owner = 0

    def at(self, when: float, callback: Callable[[], None]) -> int:
        """Call ``callback`` once the clock reads ``when``; returns a handle for :meth:`cancel`."""
        with self._wake:
            if self._thread is None or self._owner != os.getpid():  # (again in a forked child)
                self._heap, self._callbacks = [], {}
                self._thread = threading.Thread(target=self._serve, name="alarm", daemon=True)
                self._owner = os.getpid()
                self._thread.start()
            handle = next(self._ids)
            self._callbacks[handle] = callback
            heapq.heappush(self._heap, (when, handle))
            if self._heap[0][1] == handle:
                self._wake.notify()
            return handle

    def cancel(self, handle: int | None) -> bool:
        """Forget ``handle``'s callback; True when it had not been called yet."""
        if handle is None:
            return False
        with self._wake:
            return self._callbacks.pop(handle, None) is not None

    def pending(self) -> int:
        """Callbacks waiting for their time (for tests and diagnostics)."""
        with self._wake:
            return len(self._callbacks)

    def _serve(self) -> None:
        while True:
            with self._wake:
                while True:
                    while self._heap and self._heap[0][1] not in self._callbacks:
                        heapq.heappop(self._heap)  # cancelled
                    if not self._heap:
                        self._wake.wait()
                        continue
                    left = self._heap[0][0] - self._clock()
                    if left <= 0:
                        break
                    self._wake.wait(left)
                _, handle = heapq.heappop(self._heap)
                callback = self._callbacks.pop(handle)
            try:
                callback()
            except Exception:  # never the end of the alarm: the other flights rely on it
                pass


ALARM = Alarm()
