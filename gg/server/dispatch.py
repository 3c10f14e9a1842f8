"""Push dispatch: parked claims answered the moment a matching flight exists.

A runner's claim is first tried at once. If nothing fits, the request parks here (an
asyncio future, no polling). Whenever something may have become offerable (a flight
opened or returned, a lease expired, a runner came back), :meth:`Dispatcher.poke`
schedules ONE matching pass that grants flights to parked claimers in a single
transaction, oldest flight first, longest-parked runner first. The pass itself is a control
use case (:func:`gg.control.leases.match_parked`: plan with the domain's matcher, apply the
grants); the dispatcher only parks, wakes, and hands out what it returns.

Lease expiry is never decided by a timer: the pass compares the clock with
``expires_at``. The dispatcher only arranges to look again at the earliest expiry, so a
flight whose holder died is re-offered without waiting for a claim to time out.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import threading
from dataclasses import dataclass, field
from typing import cast

from gg.control import leases as lease_ops
from gg.control.core import Core
from gg.domain.runners import parked_wait
from gg.errors import TooManyRequests
from gg.server.connections import ON_LOST, settled
from gg.server.off_loop import off_loop

_READ = object()  # _arm_expiry_wake: read when the earliest lease is due
# How long a read that found nothing offerable stands for later claims (when nothing poked
# meanwhile): a bound, should a change ever make a flight offerable without a signal.
NOTHING_HOLDS_FOR = 1.0


# A parked claim's wait ends at the first tick of this many seconds at or after its own end:
# one timer a tick for every claim ending in it, not one a claim (a timer, its handle, its
# context and its callback are objects the collector walks: docs/performance.md).
END_TICK = 0.05


@dataclass(eq=False, slots=True)
class Parked:
    runner_id: str
    future: asyncio.Future
    dispatcher: Dispatcher
    order: int = field(default=0)
    instructable: bool = False  # a heartbeat claim: may be answered with an instruction
    in_pass: bool = False  # a pass (on the writer) may be granting it a flight right now
    gone: bool = False  # its claim was answered or timed out: no pass may take it
    timed_out: bool = False  # its wait ended while a pass held it: that pass answers it
    waits: float = 0.0  # how long it waits before "nothing for you" (parked_wait)
    tick: int = 0  # the tick at which its wait ends (Dispatcher._ends)

    def __call__(self) -> None:
        """Stop waiting: its connection was lost (``connections.ON_LOST``)."""
        self.dispatcher._timed_out(self)


class Dispatcher:
    def __init__(self, core: Core):
        self.core = core
        self.parked: dict[int, Parked] = {}
        self._ends: dict[int, dict[int, Parked]] = {}  # tick -> the claims whose wait ends then
        self._per_runner: dict[str, int] = {}
        self.closing = False
        self._order = itertools.count()
        self._pass_scheduled = False
        self._pass_running = False
        self._pokes = 0  # how many times something may have become offerable
        self._expiry_reads = 0  # reads of the earliest expiry begun (the newest one counts)
        self._again = False
        # The last read that found nothing offerable: (pokes when it began, when it began,
        # the earliest lease's expiry), see _nothing_known.
        self._nothing: tuple[int, float, float | None] | None = None
        # The read of what is offerable under way: (pokes when it began, its answer to come),
        # shared by every claim that needs it before something pokes (_offer_state)
        self._reading: tuple[int, asyncio.Future] | None = None
        self.reads_shared = 0  # claims and passes that took the read under way, not one more
        self._expiry_handle: asyncio.TimerHandle | None = None
        self._expiry_at: float | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()  # parked claims between the loop and the writer's tail
        core.signals.on_ready.append(self.poke)
        core.signals.on_takers.append(self.look)
        core.signals.on_missed.append(self.poke)
        core.signals.on_instruction.append(self._instruct_soon)
        core.tail = self._tail

    # -- the claim --------------------------------------------------------------------

    async def claim(self, runner_id: str, free_slots: int, wait: float, *,
                    instructable: bool = False,
                    parked_on: dict | None = None):
        """A flight and its grant, an instruction (only to an ``instructable`` claim, see
        :meth:`instruct`), or None: nothing for you. ``parked_on``: the request's ASGI scope;
        a claim that parks puts there (``connections.ON_LOST``) how to stop waiting, so that
        a runner gone while parked (its connection lost) is offered nothing: a flight granted
        to it would only fly again once its lease ran out."""
        self.loop = asyncio.get_running_loop()
        if free_slots <= 0:
            self.release(runner_id)  # "stop claiming": a stopping runner frees its parked claim
            return None
        got = None
        pokes = self._pokes
        offerable, due = await self._offer_state()
        if offerable:  # else nothing to take: no trip to the writer (a re-parked claim's case)
            got = await self.core.run(lease_ops.try_claim, runner_id, free_slots)
        if got is not None or wait <= 0 or free_slots <= 0 or self.closing:
            return got
        cap = self.core.settings.max_parked_claims
        if self._per_runner.get(runner_id, 0) >= cap:
            # A runner holds one claim at a time; more is a stale connection or a flood, and
            # every parked claim holds a socket. 429 makes the runner loop pause a moment.
            raise TooManyRequests(f"this runner already has {cap} parked claims; try again shortly")
        parked = Parked(runner_id, self.loop.create_future(), self, next(self._order),
                        instructable)
        with self._lock:
            self.parked[parked.order] = parked
        self._per_runner[runner_id] = self._per_runner.get(runner_id, 0) + 1
        if offerable or self._pokes != pokes:
            # The writer ran meanwhile, or a flight may have become offerable while the read
            # was on its way back (its signal found this claim not parked yet): a pass looks
            # again (it arms the look at the earliest expiry too).
            self.poke()
        else:
            # A flight committed after the read raises its signal on the loop after this step,
            # which finds this claim parked and pokes a pass; so the read stands for both looks.
            self._arm_expiry_wake(due)
        # What a parked claim holds while it waits: this frame, the record and its future,
        # and a place at its tick (a parked claim is mostly memory: docs/performance.md,
        # "Parked claims"). A heartbeat claim ends at its own moment of its wait's last
        # seconds: the fleet's claims parked together by a stall do not all come back
        # together (gg.domain.runners.parked_wait); a plain claim waits what it asked.
        parked.waits = (parked_wait(wait, self.core.settings.claim_wait_spread, random.random())
                        if instructable else wait)
        self._end_at(parked)
        if parked_on is not None:
            parked_on[ON_LOST] = parked
            settled(parked_on)  # waiting, not working: the gate reads another request
        try:
            return await parked.future or None
        finally:
            ending = self._ends.get(parked.tick)
            if ending is not None:
                ending.pop(parked.order, None)
            with self._lock:
                parked.gone = True
                self.parked.pop(parked.order, None)
            left = self._per_runner.pop(runner_id, 1) - 1
            if left > 0:
                self._per_runner[runner_id] = left

    async def _offer_state(self) -> tuple[bool, float | None]:
        """Whether anything may be offerable, and when the earliest lease is due: known
        without a read while nothing poked since a read found nothing (:meth:`_nothing_known`),
        else read on a worker thread."""
        known = self._nothing_known()
        if known is not None:
            return known
        reading = self._reading
        if reading is not None and reading[0] == self._pokes:
            # Begun after the last poke, so it answers for this claim too: hundreds of claims
            # a second arriving while it is on its way take its answer, not a read each
            # (each its own trip to a worker thread, queued behind the others).
            self.reads_shared += 1
            return await asyncio.shield(reading[1])
        pokes, at = self._pokes, self.core.now()
        read = asyncio.ensure_future(off_loop(lease_ops.offer_state, self.core))
        read.add_done_callback(self._read_done)
        self._reading = (pokes, read)
        offerable, due = await asyncio.shield(read)  # a claim gone meanwhile: the read goes on
        if not offerable:
            self._nothing = (pokes, at, due)
        return offerable, due

    def _read_done(self, read: asyncio.Future) -> None:
        """The shared read ended: the next claim reads afresh. Its failure is taken here too
        (every claim awaiting it hears it; with none left, it is not logged as unheard)."""
        if self._reading is not None and self._reading[1] is read:
            self._reading = None
        if not read.cancelled():
            read.exception()

    def _nothing_known(self) -> tuple[bool, float | None] | None:
        """(False, the earliest lease's expiry) while the last read that found nothing
        offerable still holds, else None. It holds while nothing poked since that read began,
        no lease it saw is due, and for :data:`NOTHING_HOLDS_FOR` at most: a flight that becomes
        ready (opened, handed back, released by a landing or an approval, an expiry recorded
        here or on another replica, a runner back) pokes (``core.signals``), and one committed
        but not yet signalled pokes when its signal comes, which then finds the claim parked,
        as after a read. With thousands of runners re-parking on an idle queue, their claims
        read the store about once a second between them, not once each."""
        nothing = self._nothing
        if nothing is None or nothing[0] != self._pokes:
            return None
        _, at, due = nothing
        now = self.core.now()
        if now - at >= NOTHING_HOLDS_FOR or (due is not None and due <= now):
            return None
        return False, due

    def _end_at(self, parked: Parked) -> None:
        """Arrange for ``parked``'s wait to end at the first tick at or after its end: one
        timer a tick, armed by the first claim ending at it."""
        loop = cast(asyncio.AbstractEventLoop, self.loop)
        tick = math.ceil((loop.time() + parked.waits) / END_TICK)
        ending = self._ends.get(tick)
        if ending is None:
            ending = self._ends[tick] = {}
            loop.call_at(tick * END_TICK, self._tick, tick)
        ending[parked.order] = parked
        parked.tick = tick

    def _tick(self, tick: int) -> None:
        for parked in self._ends.pop(tick, {}).values():
            self._timed_out(parked)

    def _timed_out(self, parked: Parked) -> None:
        """A parked claim's wait is over: "nothing for you", unless a pass holds it right now
        (then that pass answers it: a flight it granted, or nothing, :meth:`_deliver`)."""
        with self._lock:
            if parked.future.done():
                return
            if parked.in_pass:
                parked.timed_out = True
                return
            parked.gone = True
        parked.future.set_result(None)

    def release(self, runner_id: str) -> None:
        """Answer this runner's parked claims with "nothing for you" now."""
        for parked in list(self.parked.values()):
            if parked.runner_id == runner_id and not parked.future.done() and not parked.in_pass:
                parked.future.set_result(None)

    def instruct(self, runner_id: str, kind: str) -> bool:
        """The seam for telling a runner something at once: answer its parked claim with the
        instruction ``kind`` instead of a flight. Control code reaches it through
        ``core.signals.instruct`` (any thread). True when a parked claim took it; when none is
        parked, the runner hears it from the state at its next claim or check-in
        (:func:`gg.domain.runners.instruction_at_claim`), so a new kind must be derivable there
        too, or be repeated until heard."""
        taken = False
        for parked in list(self.parked.values()):
            with self._lock:  # a pass granting it a flight right now answers it instead
                if (parked.runner_id == runner_id and parked.instructable and not parked.in_pass
                        and not parked.future.done()):
                    parked.future.set_result(kind)
                    taken = True
        return taken

    def is_parked(self, runner_id: str) -> bool:
        """Whether a heartbeat claim of this runner is parked (an instruction reaches it now)."""
        return any(p.runner_id == runner_id and p.instructable and not p.future.done()
                   for p in list(self.parked.values()))

    def _instruct_soon(self, runner_id: str, kind: str) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.instruct, runner_id, kind)

    def release_all(self) -> None:
        """The server is stopping: answer every parked claim with "nothing for you" now,
        and park no more."""
        self.closing = True
        for parked in list(self.parked.values()):
            if not parked.future.done() and not parked.in_pass:
                parked.future.set_result(None)

    @property
    def parked_count(self) -> int:
        return len(self.parked)

    # -- wake-ups ---------------------------------------------------------------------

    def poke(self) -> None:
        """Something may have become offerable: run one matching pass soon."""
        self._pokes += 1  # a claim whose read was under way looks again (claim)
        if self.loop is None or self._pass_scheduled or not self.parked:
            return
        self._pass_scheduled = True
        self.loop.call_soon_threadsafe(self._pass)

    def look(self) -> None:
        """A runner may take waiting flights now (``signals.takers_changed``): nothing became
        offerable, so a pass is run only when something may be (not known to be nothing)."""
        if self.loop is None or self._pass_scheduled or not self.parked:
            return
        if self._nothing_known() is not None:
            return  # nothing waits that it could take
        self._pass_scheduled = True
        self.loop.call_soon_threadsafe(self._pass)

    def _pass(self) -> None:
        self._pass_scheduled = False
        if self._pass_running:
            self._again = True
            return
        self._pass_running = True  # from the read on: a poke meanwhile makes it look again
        assert self.loop is not None, "a pass is scheduled on the loop (poke)"
        self.loop.create_task(self._look())

    async def _look(self) -> None:
        """Read whether anything is offerable (on a worker thread), then run the pass."""
        self._again = False
        try:
            offerable, due = await self._offer_state()
        except Exception:
            self._pass_running = False
            raise
        picks = self._pick() if offerable else {}
        if not picks:
            # Nothing to grant (a runner came back, say): no pass over every parked claim.
            # A flight committed after this read raises its signal on the loop later,
            # which pokes again (or poked meanwhile: look again).
            self._pass_running = False
            self._arm_expiry_wake(due)
            if self._again:
                self._again = False
                self.poke()
            return
        await self._run_pass(picks)

    def _pick(self) -> dict[str, Parked]:
        """The first waiting claim of each parked runner, longest-parked first, marked as
        taken by a pass (called on the loop, and by the writer for the group's tail)."""
        first_by_runner: dict[str, Parked] = {}
        with self._lock:
            for p in sorted(self.parked.values(), key=lambda p: p.order):
                if p.gone or p.in_pass or p.future.done():
                    continue
                if p.runner_id not in first_by_runner:
                    first_by_runner[p.runner_id] = p
                    p.in_pass = True
        return first_by_runner

    async def _run_pass(self, picks: dict[str, Parked]) -> None:
        granted: list = []
        due = None
        try:
            granted, due = await self.core.run(_matched, list(picks))
        finally:
            self._deliver(picks, granted)
            self._pass_running = False
        if self._again or (granted and len(self.parked) > len(picks)):
            self._again = False
            self.poke()  # woken meanwhile, or a runner with a second parked claim may take more
        self._arm_expiry_wake(due)

    def _deliver(self, picks: dict[str, Parked], granted: list) -> None:
        """Hand the pass's grants to their claims (on the loop, after the commit)."""
        for flight, grant in granted:
            parked = picks[grant.runner_id]
            if not parked.future.done():
                parked.future.set_result((flight, grant))
        for parked in picks.values():
            with self._lock:
                parked.in_pass = False
                if not parked.timed_out or parked.future.done():
                    continue
                parked.gone = True
            parked.future.set_result(None)  # its wait ended during the pass, which gave nothing

    def _tail(self):
        """The group commit's last step (writer thread): a flight became ready in this
        group, so grant it to parked claims in the same commit (open and grant share one
        fsync). Returns what to do once the commit is known to hold, or not."""
        loop = self.loop
        if loop is None or not self.parked or self.closing:
            return None
        picks = self._pick()
        if not picks:
            return None
        try:
            granted = lease_ops.match_parked(self.core, list(picks))
        except BaseException:
            loop.call_soon_threadsafe(self._deliver, picks, [])
            raise

        def told(ok: bool) -> None:
            loop.call_soon_threadsafe(self._deliver, picks, granted if ok else [])
            if ok and granted:
                loop.call_soon_threadsafe(self.poke)  # a second parked claim may take more

        return told

    def lease_may_have_started(self, flight_id: str) -> None:
        """A flight changed, maybe granted by another replica (gg.server.replicas): with
        claims parked here and no look at an expiry arranged, arrange one. A lease granted
        now is due after every lease already looked for, so only the first needs a read."""
        if self.parked and self._expiry_handle is None and self.loop is not None:
            self.loop.call_soon_threadsafe(self._arm_if_unarmed)

    def _arm_if_unarmed(self) -> None:
        if self._expiry_handle is None:
            self._arm_expiry_wake()

    def _arm_expiry_wake(self, nxt: float | None | object = _READ) -> None:
        """Look again when the earliest lease is due (clock comparison happens then);
        ``nxt``: when that is, read in this step of the loop (else it is read here)."""
        if self.loop is None:
            return
        self._expiry_reads += 1
        if nxt is _READ:  # read on a worker thread, then armed (if no newer read began)
            self.loop.create_task(self._read_expiry(self._expiry_reads))
            return
        due = cast("float | None", nxt)  # a time, or None
        if nxt == self._expiry_at and self._expiry_handle is not None:
            return
        if self._expiry_handle is not None:
            self._expiry_handle.cancel()
            self._expiry_handle = None
        self._expiry_at = due
        if due is None or not self.parked:
            return
        delay = max(0.0, due - self.core.now()) + 0.01
        self._expiry_handle = self.loop.call_later(delay, self._expiry_due)

    async def _read_expiry(self, read: int) -> None:
        due = await off_loop(lease_ops.next_expiry, self.core)
        if read == self._expiry_reads:
            self._arm_expiry_wake(due)

    def _expiry_due(self) -> None:
        self._expiry_handle = None
        self._expiry_at = None
        self._pass()


def _matched(core: Core, picks: list) -> tuple[list, float | None]:
    """The pass's grants and, read in the same turn of the writer, the earliest expiry."""
    return lease_ops.match_parked(core, picks), lease_ops.next_expiry(core)


class Watch:
    """Long-poll wake-ups for readers following a flight or the event feed."""

    def __init__(self, core: Core):
        self._flights: dict[str, set[asyncio.Future]] = {}
        self._events: set[asyncio.Future] = set()
        core.signals.on_flight.append(self._flight_changed)
        core.signals.on_event.append(self._event_added)
        core.signals.on_missed.append(self._look_again)

    @property
    def waiting(self) -> int:
        """Long polls held open now (``gg_long_polls_waiting``)."""
        return len(self._events) + sum(len(bucket) for bucket in self._flights.values())

    async def flight(self, flight_id: str, timeout: float, scope: dict | None = None) -> None:
        await self._wait(self._flights.setdefault(flight_id, set()), timeout, flight_id, scope)

    async def events(self, timeout: float, scope: dict | None = None) -> None:
        await self._wait(self._events, timeout, None, scope)

    async def _wait(self, bucket: set, timeout: float, flight_id: str | None,
                    scope: dict | None) -> None:
        """Wait for a wake-up; ``scope``: the request held meanwhile, which waits without
        working (``connections.settled``)."""
        if scope is not None:
            settled(scope)
        fut = asyncio.get_running_loop().create_future()
        bucket.add(fut)
        try:
            await asyncio.wait({fut}, timeout=timeout)
        finally:
            bucket.discard(fut)
            if flight_id is not None and not bucket:
                self._flights.pop(flight_id, None)

    def release_all(self) -> None:
        """The server is stopping: end every long poll now (readers look once more)."""
        for bucket in [self._events, *self._flights.values()]:
            for fut in bucket:
                if not fut.done():
                    fut.set_result(None)

    def _flight_changed(self, flight_id: str) -> None:
        for fut in self._flights.get(flight_id, ()):
            if not fut.done():
                fut.set_result(None)

    def _look_again(self) -> None:
        """Wake-ups may have been lost: every follower reads once more."""
        for bucket in [self._events, *self._flights.values()]:
            for fut in bucket:
                if not fut.done():
                    fut.set_result(None)

    def _event_added(self) -> None:
        for fut in self._events:
            if not fut.done():
                fut.set_result(None)
