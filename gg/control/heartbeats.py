"""Heartbeats written together: many runners' readings by one statement in a group commit.

A parked or re-parked claim carries its runner's readings and counts as its check-in
(:func:`gg.control.runners.heartbeat_coalesced`). With thousands of runners that is hundreds
of heartbeats a second; each written as a transaction of its own, taken on the event loop,
would cost a lock, a ``BEGIN``, an ``UPDATE`` and a ``COMMIT`` apiece and make the loop wait
for the writer. Here a heartbeat is noted in memory (one entry a runner: the newest reading
wins) and the first one noted queues ONE unit for the store's writer
(:meth:`gg.control.core.Core.soon`, without fsync: a heartbeat's loss on a power cut is
harmless). When the writer runs it, the unit takes every heartbeat noted so far and writes
them with one ``UPDATE … FROM (VALUES …)`` per thousand runners
(:meth:`gg.store.runners.RunnerRows.record_heartbeats`); the next heartbeat queues the next
unit. So a runner's ``last_seen_at`` and readings are written at most once per group commit,
within one group commit of the heartbeat, and the caller's answer waits for that commit (the
claim is answered after its heartbeat is written, as before). Liveness reads
``last_seen_at`` as before, so ``offline_after`` and ``aged_out`` keep their meaning.

A runner that was offline and is back makes the unit raise ``ready_changed`` (held until
the commit, as every unit's signals): waiting flights may go to it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future

log = logging.getLogger("gg.control")


class HeartbeatWrites:
    """Heartbeats noted on the event loop, written by the store's writer in one statement."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # noted on the loop, taken on the writer thread
        self._pending: dict[str, tuple] = {}  # runner id -> its newest heartbeat row
        self._back = False  # a runner noted since the last write was offline before
        self._batch: asyncio.Future | None = None  # resolved when the queued unit committed
        self.units = 0  # units written so far, and the heartbeats they carried
        self.written = 0

    def note(self, core, runner_id: str, seen: float, readings: dict, peer: str | None,
             checks: float | None, *, came_back: bool) -> asyncio.Future:
        """Note one heartbeat (on the event loop); a future resolved once it is committed."""
        with self._lock:
            self._pending[runner_id] = (runner_id, seen, readings, peer, checks)
            self._back = self._back or came_back
            batch = self._batch
            if batch is not None:
                return batch
            loop = asyncio.get_running_loop()
            batch = self._batch = loop.create_future()
        done = core.soon(self._write, durable=False)
        done.add_done_callback(lambda f: loop.call_soon_threadsafe(_settle, batch, f))
        return batch

    def _write(self, core) -> int:
        """The writer's unit: every heartbeat noted so far, in one statement (per thousand)."""
        with self._lock:
            beats, self._pending = list(self._pending.values()), {}
            back, self._back = self._back, False
            self._batch = None  # a heartbeat noted from now on queues the next unit
        with core.store.atomic(durable=False):
            core.store.record_heartbeats(beats)
        self.units += 1
        self.written += len(beats)
        if back:
            core.signals.ready_changed()  # raised after the commit: waiting flights may go
        return len(beats)


def _settle(batch: asyncio.Future, done: Future) -> None:
    if batch.done():
        return
    exc = done.exception()
    if exc is not None:
        log.error("heartbeats not written: %s", exc)
        batch.set_exception(exc)
    else:
        batch.set_result(None)
