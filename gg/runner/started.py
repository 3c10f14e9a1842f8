"""A flight's `started` fact, held until a request about the flight carries it.

The runner no longer reports `started` as a request of its own (docs/lease-protocol.md, "A
flight's requests"): it rides with the first output batch or the hand-back, and goes alone only
once ``within`` seconds passed with neither sent. :class:`PendingStarted` is that one fact: it
is taken (with ``ago``, the seconds it was held, on this runner's monotonic clock, so the
control plane dates it when it happened) by whichever request leaves first, and put back when
that request was not accepted, so that the next one carries it.
"""

from __future__ import annotations

import threading
import time


class PendingStarted:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: tuple[dict, float] | None = None  # (fact, monotonic time it started)

    def hold(self, fact: dict) -> None:
        """The flight started now: keep ``fact`` for the next request."""
        with self._lock:
            self._pending = (fact, time.monotonic())

    def take(self) -> list[dict]:
        """The pending fact with how long ago it happened, once; else nothing."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return []
        fact, at = pending
        return [{**fact, "ago": round(max(0.0, time.monotonic() - at), 6)}]

    def put_back(self, taken: list[dict]) -> None:
        """The request that carried what :meth:`take` gave was not accepted: pending again,
        with its own start time."""
        if taken:
            fact = {k: v for k, v in taken[0].items() if k != "ago"}
            with self._lock:
                if self._pending is None:
                    self._pending = (fact, time.monotonic() - taken[0]["ago"])

    def due(self, within: float) -> float | None:
        """When it must leave alone (monotonic), if one is pending."""
        with self._lock:
            pending = self._pending
        return None if pending is None else pending[1] + within
