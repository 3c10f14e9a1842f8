"""Heartbeats judged and written together: many runners' in one unit of the store's writer.

A parked or re-parked claim carries its runner's readings and counts as its check-in
(:func:`gg.control.runners.heartbeat_coalesced`). With thousands of runners that is hundreds
of heartbeats a second. Each one read on a worker thread and written in a transaction of its
own would cost a thread hop, a read, a lock, a ``BEGIN``, an ``UPDATE`` and a ``COMMIT``
apiece, and every thread the loop hands work to competes with it for the interpreter's lock.
Here a heartbeat is noted in memory (:class:`Beat`) and the first one noted queues ONE unit
for the store's writer (:meth:`gg.control.core.Core.soon`, without fsync: a heartbeat's loss
on a power cut is harmless). When the writer runs it, the unit takes every heartbeat noted so
far and:

- reads the runners they name with one statement per few hundred (only the fields liveness
  and a claim's instruction read), and which of them a console waits for;
- judges each heartbeat as a heartbeat alone is judged (``judge``, given by
  :mod:`gg.control.runners`): a runner unknown or retired is refused, any other hears the
  instruction it must hear before its claim parks (or nothing);
- writes the accepted ones with one ``UPDATE … FROM (VALUES …)`` per thousand runners
  (:meth:`gg.store.runners.RunnerRows.record_heartbeats`), a runner's newest winning.

The next heartbeat queues the next unit. So a heartbeat claim crosses to another thread once,
to the writer, whose group commit it shares with every heartbeat noted meanwhile; a runner's
``last_seen_at`` and readings are written at most once per group commit, and each caller's
answer waits for that commit (the claim is answered after its heartbeat is written). Liveness
reads ``last_seen_at`` as before, so ``offline_after`` and ``aged_out`` keep their meaning.

A runner that was offline and is back makes the unit raise ``takers_changed`` (held until
the commit, as every unit's signals): waiting flights may go to it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger("gg.control")


@dataclass(slots=True)
class Beat:
    """One heartbeat a claim carries, as noted on the loop."""

    runner_id: str
    now: float
    readings: dict
    free_slots: int
    peer_address: str | None
    stated_policy: str | None
    answer: asyncio.Future | None = field(default=None, repr=False)  # the caller's, on the loop


@dataclass(slots=True)
class Judged:
    """What the unit's judge made of the heartbeats it was given, in their order."""

    told: list[Any]  # per heartbeat: the instruction (or None), or the exception refusing it
    rows: list[tuple]  # what to write: (runner id, seen, readings, peer, checks at or None)
    back: bool  # a runner among them was offline before


Judge = Callable[[Any, list[Beat]], Judged]


class HeartbeatWrites:
    """Heartbeats noted on the event loop, judged and written by the store's writer together."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # noted on the loop, taken on the writer thread
        self._pending: list[Beat] = []
        self._queued = False  # a unit is queued that will take what is noted from now on
        self.units = 0  # units written so far, and the runners' rows they wrote
        self.written = 0

    def note(self, core, judge: Judge, beat: Beat) -> asyncio.Future:
        """Note one heartbeat (on the event loop); a future of what the runner is told (an
        instruction or None), or of its refusal, set once the heartbeat is committed."""
        loop = asyncio.get_running_loop()
        beat.answer = loop.create_future()
        with self._lock:
            self._pending.append(beat)
            if self._queued:
                return beat.answer
            self._queued = True
        taken: list[Beat] = []  # what the unit took: answered even when it fails
        done = core.soon(self._write, judge, taken, durable=False)
        done.add_done_callback(lambda f: loop.call_soon_threadsafe(_settle, f, taken))
        return beat.answer

    @property
    def pending(self) -> list[Beat]:
        """The heartbeats noted and not yet taken by a unit (a copy)."""
        with self._lock:
            return list(self._pending)

    def _write(self, core, judge: Judge, taken: list[Beat]) -> list[Any]:
        """The writer's unit: every heartbeat noted so far, judged and written together; what
        each is told, in the order of ``taken``."""
        with self._lock:
            beats, self._pending = self._pending, []
            self._queued = False  # a heartbeat noted from now on queues the next unit
        taken.extend(beats)
        with core.store.atomic(durable=False):
            judged = judge(core, beats)
            newest = {row[0]: row for row in judged.rows}  # a runner's newest heartbeat wins
            if newest:
                core.store.record_heartbeats(list(newest.values()))
        self.units += 1
        self.written += len(newest)
        if judged.back:
            core.signals.takers_changed()  # raised after the commit: waiting flights may go
        return judged.told


def _settle(done: Future, taken: list[Beat]) -> None:
    """On the loop, after the unit's commit (or its failure): each caller's answer."""
    exc = done.exception()
    if exc is not None:
        log.error("heartbeats not written: %s", exc)
        told: list[Any] = [exc] * len(taken)
    else:
        told, _ = done.result()
    for beat, answer in zip(taken, told, strict=True):
        if beat.answer is None or beat.answer.done():
            continue
        if isinstance(answer, BaseException):
            beat.answer.set_exception(answer)
        else:
            beat.answer.set_result(answer)
