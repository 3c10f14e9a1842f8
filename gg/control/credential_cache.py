"""Runner credential checks without a store read: a bounded cache from a token's hash to the
runner it names.

Correctness first. An entry is dropped at once, after the change commits, whenever the
credential stops naming that runner as it did: renewed, superseded by a new registration or
enrolment, a member's credential cut, the runner retired or forgotten (the use cases that do
so call :meth:`CredentialCache.forget`). A read that began before such a drop never refills
the cache with what it read (a generation count guards the fill), and every entry is dropped
after ``credential_cache_ttl`` in any case. What is cached is the runner's identity only
(:class:`~gg.domain.runners.RunnerIdentity`: id, name, kind, credential expiry, retired or
not, ~0.3 KB), never its row: routes that need its changing fields read them fresh (a
check-in, a claim's heartbeat, a pool maintainer's calls).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable

from gg.domain.runners import RunnerIdentity


class CredentialCache:
    def __init__(self, size: int, ttl: float, clock: Callable[[], float]):
        self.size = size
        self.ttl = ttl
        self.clock = clock
        self._entries: OrderedDict[str, tuple[RunnerIdentity, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.generation = 0
        # With replicas (gg.server.replicas): told every runner forgotten here, so that the
        # other replicas drop their entries too (they call forget(..., told=False)).
        self.on_forget: Callable[[str], None] | None = None

    def get(self, token_hash: str) -> RunnerIdentity | None:
        if self.size <= 0:
            return None
        with self._lock:
            hit = self._entries.get(token_hash)
            if hit is None:
                return None
            runner, at = hit
            if self.clock() - at >= self.ttl:
                del self._entries[token_hash]
                return None
            self._entries.move_to_end(token_hash)
            return runner

    def put(self, token_hash: str, runner: RunnerIdentity, generation: int) -> None:
        """Keep ``runner`` for ``token_hash``, unless something was forgotten since the read
        that found it began (``generation`` is :attr:`generation` as it was then)."""
        if self.size <= 0:
            return
        with self._lock:
            if generation != self.generation:
                return
            self._entries[token_hash] = (runner, self.clock())
            self._entries.move_to_end(token_hash)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def forget(self, runner_id: str, *, told: bool = True) -> None:
        """Drop every entry naming ``runner_id`` (its credential changed or died), and tell
        the other replicas to (``told=False``: they told us)."""
        with self._lock:
            self.generation += 1
            for key in [k for k, (r, _) in self._entries.items() if r.id == runner_id]:
                del self._entries[key]
        if told and self.on_forget is not None:
            self.on_forget(runner_id)

    def clear(self) -> None:
        with self._lock:
            self.generation += 1
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
