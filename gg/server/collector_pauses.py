"""How long the interpreter's garbage collector held the server, by generation.

Python's cyclic collector stops every thread while it walks a generation's objects. A
collection of the oldest generation walks all the objects the server keeps, and each parked
claim keeps a few dozen that live its wait: with thousands of claims parked, that walk is the
longest pause the event loop knows (docs/performance.md). ``gg_gc_pause_seconds`` (``GET
/metrics``, a histogram labelled by generation) says how often and how long, beside
``gg_event_loop_lag_seconds``.

The collector calls back at the start and end of each collection, on whichever thread set
it off, with the interpreter's lock held and the collector itself busy: the callback only
counts into plain lists (no lock that the interrupted thread might hold, no allocation
that could start another collection), and the histogram is made from them at a scrape.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client.core import HistogramMetricFamily

from gg.server.loop_lag import LAG_BUCKETS

GENERATIONS = (0, 1, 2)


class CollectorPauses:
    """The pauses' counts per generation and bucket (a Prometheus collector of its own)."""

    def __init__(self) -> None:
        width = len(LAG_BUCKETS) + 1  # the last one: past every bucket (+Inf)
        self._counts = [[0] * width for _ in GENERATIONS]
        self._sums = [0.0 for _ in GENERATIONS]
        self._started = 0.0

    def start(self) -> None:
        """Count from now on (the server's lifespan; :meth:`stop` when it ends)."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        generation = info.get("generation", 2)
        self.observe(generation if generation in GENERATIONS else 2, took)

    def observe(self, generation: int, took: float) -> None:
        counts = self._counts[generation]
        for i, bound in enumerate(LAG_BUCKETS):
            if took <= bound:
                counts[i] += 1
                break
        else:
            counts[-1] += 1
        self._sums[generation] += took

    def collect(self) -> Iterable[HistogramMetricFamily]:
        family = HistogramMetricFamily(
            "gg_gc_pause_seconds", "How long each collection of the interpreter's cyclic "
            "garbage collector held every thread of the server, by generation (2: every "
            "object the server keeps).", labels=["generation"])
        for generation in GENERATIONS:
            counts = list(self._counts[generation])
            cumulative, buckets = 0, []
            for bound, count in zip((*LAG_BUCKETS, float("inf")), counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            family.add_metric([str(generation)], buckets, self._sums[generation])
        yield family
