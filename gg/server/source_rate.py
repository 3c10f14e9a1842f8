"""How often one address may ask for something anonymous: a token bucket per peer address.

``POST /v1/key-nonces`` needs no token (the machine has none yet), so anyone may ask; a
flood from one address is answered 429 once its bucket is empty, and the buckets of other
addresses (a real registration) are untouched. The buckets live in this process: with
replicas, each counts its own. Memory is bounded: the least recently seen addresses are
forgotten beyond ``MAX_SOURCES`` (a forgotten address starts with a full bucket, which costs
nothing, since a nonce stores nothing until it is spent).
"""

from __future__ import annotations

from collections import OrderedDict

MAX_SOURCES = 100_000


class SourceRate:
    """``per_minute`` asks a minute from each address, in bursts of at most that many."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self.buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def allow(self, source: str, now: float) -> bool:
        if self.per_minute <= 0:
            return True  # no limit
        tokens, at = self.buckets.pop(source, (float(self.per_minute), now))
        tokens = min(float(self.per_minute), tokens + (now - at) * self.per_minute / 60.0)
        allowed = tokens >= 1.0
        self.buckets[source] = (tokens - 1.0 if allowed else tokens, now)
        if len(self.buckets) > MAX_SOURCES:
            self.buckets.popitem(last=False)
        return allowed
