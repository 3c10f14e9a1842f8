"""The server's event-loop lag over one run: ``gg_event_loop_lag_seconds`` read from
``/metrics`` before and after, and the difference read as percentiles.

A Prometheus histogram is cumulative (each ``le`` bucket counts every wake-up at most that
late), so a run's own histogram is the bucket-by-bucket difference of two readings, and a
percentile is known only as the bucket it falls in: p99 "≤ 20 ms" means the 99th percentile
wake-up was at most 20 ms late. Pure functions of the ``/metrics`` text (no gg import), so
they are unit-tested without a server.
"""

from __future__ import annotations

import math
import re

NAME = "gg_event_loop_lag_seconds"
TARGET = 0.02  # seconds: the p99 bound, a bucket's bound too


def read(text: str, name: str = NAME, labels: str = "") -> dict:
    """``{"buckets": {le: cumulative count}, "sum": s, "count": n}`` from one ``/metrics``
    text (empty buckets, zero sum and count when the histogram is absent); ``labels``: only
    the series whose labels hold it (``generation="2"``)."""
    buckets: dict[float, float] = {}
    out = {"buckets": buckets, "sum": 0.0, "count": 0.0}
    for held, value in re.findall(rf"^{re.escape(name)}_bucket{{([^}}]*)}} (\S+)$", text, re.M):
        le = re.search(r'le="([^"]+)"', held)
        if le and labels in held:
            buckets[math.inf if le[1] == "+Inf" else float(le[1])] = float(value)
    for part in ("sum", "count"):
        for held, value in re.findall(rf"^{re.escape(name)}_{part}(?:{{([^}}]*)}})? (\S+)$",
                                      text, re.M):
            if labels in held:
                out[part] = float(value)
    return out


def add(a: dict, b: dict) -> dict:
    """Two readings summed (several replicas read as one)."""
    les = set(a["buckets"]) | set(b["buckets"])
    return {"buckets": {le: a["buckets"].get(le, 0.0) + b["buckets"].get(le, 0.0) for le in les},
            "sum": a["sum"] + b["sum"], "count": a["count"] + b["count"]}


def between(before: dict, after: dict) -> dict:
    """What was observed after ``before`` and up to ``after``."""
    return {"buckets": {le: after["buckets"][le] - before["buckets"].get(le, 0.0)
                        for le in after["buckets"]},
            "sum": after["sum"] - before["sum"], "count": after["count"] - before["count"]}


def bound(reading: dict, q: float) -> float | None:
    """The upper bound (seconds) of the bucket holding the ``q``-th percentile (q in 0..100,
    100: the largest); ``math.inf`` when it lies past the last finite bucket; None when
    nothing was observed."""
    n = reading["count"]
    if n <= 0:
        return None
    rank = max(1, math.ceil(q * n / 100))
    for le in sorted(reading["buckets"]):
        if reading["buckets"][le] >= rank:
            return le
    return math.inf


def figures(reading: dict) -> dict:
    """p50, p99 and max as bucket bounds in ms (None: nothing observed; ``math.inf``: past the
    last bucket), the mean in ms, how many wake-ups were observed and how many of them were
    later than :data:`TARGET`."""
    def ms(seconds: float | None) -> float | None:
        return None if seconds is None else round(seconds * 1000, 1)
    n = reading["count"]
    within = reading["buckets"].get(TARGET)
    return {"p50_ms": ms(bound(reading, 50)), "p99_ms": ms(bound(reading, 99)),
            "max_ms": ms(bound(reading, 100)),
            "mean_ms": round(reading["sum"] * 1000 / n, 2) if n > 0 else None, "n": int(n),
            # how far from p99 ≤ 20 ms, which a bucket bound alone cannot say: it holds
            # while at most 1 % of the wake-ups are later
            "later_than_target": None if within is None or n <= 0 else int(n - within)}


def shown(value: float | None) -> str:
    """A bucket bound as docs/performance.md writes it."""
    if value is None:
        return "–"
    if math.isinf(value):
        return "past the last bucket"
    return f"≤ {value:g}"
