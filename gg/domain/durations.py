"""How long things took, kept small: a fixed, fading histogram per kind of flight.

The estimator needs the distribution of similar flights' durations (and of a pool's warm-up),
not every duration ever seen. A :class:`Summary` is a histogram over fixed buckets whose
bounds grow by ``RATIO`` from ``FLOOR`` seconds, so it never holds more than ``BUCKETS``
numbers whatever the history; each new duration first fades the old weights by
``1 - 1/window``, so a kind of flight that got faster is believed within a few dozen runs.
Pure: the store keeps the weights as JSON, and the flight's final report adds to them in its
own transaction (``gg.control.lifecycle``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Iterable

FLOOR = 0.05  # seconds: the upper bound of the first bucket
RATIO = 1.1  # each bucket's bounds are 10% wider than the one before (±5% resolution)
BUCKETS = 200  # 0.05 s .. about 3 years; a longer duration goes in the last bucket
_DROP = 1e-3  # a weight faded below this is forgotten


def bucket_of(seconds: float) -> int:
    if seconds <= FLOOR:
        return 0
    return min(BUCKETS - 1, int(math.ceil(math.log(seconds / FLOOR) / math.log(RATIO))))


def _bounds(i: int) -> tuple[float, float]:
    if i == 0:
        return 0.0, FLOOR
    return FLOOR * RATIO ** (i - 1), FLOOR * RATIO ** i


def _middle(i: int) -> float:
    low, high = _bounds(i)
    return high / 2 if i == 0 else math.sqrt(low * high)


_BOUNDS = [_bounds(i) for i in range(BUCKETS)]  # worked out once: the estimator asks often
_MIDDLE = [_middle(i) for i in range(BUCKETS)]


@dataclass(frozen=True)
class Summary:
    """Bucket index -> faded count of durations that fell in it."""

    weights: dict[int, float] = field(default_factory=dict)

    @property
    def count(self) -> float:
        return sum(self.weights.values())

    def add(self, seconds: float, window: int) -> Summary:
        """This summary with one more duration, the older ones faded by ``1 - 1/window``."""
        keep = 1.0 - 1.0 / max(window, 1)
        faded = {i: w * keep for i, w in self.weights.items() if w * keep >= _DROP}
        i = bucket_of(max(seconds, 0.0))
        faded[i] = faded.get(i, 0.0) + 1.0
        return Summary(faded)

    def remaining(self, elapsed: float = 0.0) -> tuple[float, float]:
        """Mean and variance of the time still to run for one of these that has run
        ``elapsed`` seconds so far: the part of the distribution longer than ``elapsed``.
        One that has outlived every duration seen is taken to end soon, with a margin as
        wide as a quarter of its age."""
        total = mean = square = 0.0
        for i, w in self.weights.items():
            low, high = _BOUNDS[i]
            if high <= elapsed:
                continue
            # inside its bucket, a duration longer than elapsed is at least elapsed
            left = (_MIDDLE[i] if elapsed <= low else (elapsed + high) / 2) - elapsed
            total += w
            mean += w * left
            square += w * left * left
        if total <= 0:
            return elapsed * 0.25, (elapsed * 0.25) ** 2
        mean /= total
        return mean, max(square / total - mean * mean, 0.0)

    def to_json(self) -> str:
        return json.dumps({str(i): round(w, 4) for i, w in sorted(self.weights.items())})

    @classmethod
    def from_json(cls, text: str | None) -> Summary:
        return cls({int(k): float(v) for k, v in json.loads(text or "{}").items()})

    @classmethod
    def merged(cls, summaries: Iterable[Summary]) -> Summary:
        out: dict[int, float] = {}
        for s in summaries:
            for i, w in s.weights.items():
                out[i] = out.get(i, 0.0) + w
        return cls(out)
