"""How late the event loop wakes: the measure of anything that blocks it.

The event loop answers every parked claim, check-in and page at once, so a read, a write or
a computation done on it holds all of them up. A task of its own asks to wake every
``TICK`` seconds and records how much later than asked it woke in the histogram
``gg_event_loop_lag_seconds`` (``GET /metrics``). It does nothing else: no deadline, lease or
dispatch depends on it (those are armed for their own instants, docs/architecture.md).
"""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Histogram

TICK = 0.05  # seconds between two wake-ups asked for
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LoopLag:
    """The histogram, and the task that fills it (started by the server's lifespan)."""

    def __init__(self, registry: CollectorRegistry):
        self.histogram = Histogram(
            "gg_event_loop_lag_seconds", "How much later than asked the server's event loop "
            f"woke a task asking to wake every {TICK} s: the time something held the loop.",
            buckets=LAG_BUCKETS, registry=registry)

    async def run(self, tick: float = TICK) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + tick
            await asyncio.sleep(tick)
            self.histogram.observe(max(0.0, loop.time() - due))
