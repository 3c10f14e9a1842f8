"""What every use case needs: the store, the settings, the clock, and the signals.

Use cases are plain functions ``fn(core, …)``: load what the domain needs, let it decide,
persist in one transaction, then raise a signal so the server can wake parked requests.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar

from gg import __version__, build_commit
from gg.control.credential_cache import CredentialCache
from gg.control.estimate_memory import EstimateMemory
from gg.control.heartbeats import HeartbeatWrites
from gg.control.verdicts import Verdicts
from gg.domain import hooks as hook_rules
from gg.domain.events import EventKind
from gg.domain.gates import Gate
from gg.domain.runners import Runner
from gg.errors import NotFound
from gg.settings import Settings
from gg.store import Store

CONTROL_PLANE = "control-plane"
T = TypeVar("T")


@dataclass
class Fired:
    """The signals a unit of work raised, held until its group commit is durable."""

    ready: bool = False
    takers: bool = False
    flights: list[str] = field(default_factory=list)
    events: bool = False
    instructions: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Signals:
    """Wake-ups. The server subscribes; use cases call after they commit.

    A use case run by the writer (:meth:`Core.run`) has not committed when it returns (its
    group commits after it), so its signals are held (:meth:`held`) and raised on the event
    loop once the group commit is durable.

    Replicas (docs/scale-out.md): when several servers share one database, ``announce`` is
    set, and every signal is also handed to it as one short line (``r``: a flight may be
    offerable; ``t``: a runner may take waiting flights; ``f ID``: a flight changed; ``e``: an
    event was recorded; ``i RUNNER KIND``: an instruction for a runner) at the moment it is
    raised, that is inside the transaction of a held unit, so the other replicas hear it only
    if and when it commits. What they hear comes back through :meth:`heard`, which raises it
    here without announcing it again.
    ``on_missed`` is called when announcements may have been lost (the listening connection
    was re-made): whoever waits looks again."""

    on_ready: list[Callable[[], None]] = field(default_factory=list)
    on_takers: list[Callable[[], None]] = field(default_factory=list)
    on_flight: list[Callable[[str], None]] = field(default_factory=list)
    on_event: list[Callable[[], None]] = field(default_factory=list)
    on_instruction: list[Callable[[str, str], None]] = field(default_factory=list)
    on_missed: list[Callable[[], None]] = field(default_factory=list)
    announce: Callable[[str], None] | None = None
    # The store's after_commit (set by Core): a signal raised inside a write transaction
    # that is not a held unit's is raised here once that transaction committed
    defer: Callable[[Callable[[], None]], None] | None = None
    # The server's event loop, set when it starts: every subscriber (a parked claim, a long
    # poll, a deadline) lives on it, so a signal raised on another thread (a write made
    # from a worker thread) is handed to the loop, never run beside it.
    loop: asyncio.AbstractEventLoop | None = None
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def ready_changed(self) -> None:
        self._once_a_unit("ready", "r", self._ready)

    def takers_changed(self) -> None:
        """A runner may take waiting flights now (back online, healthy again, relabelled):
        nothing became ready, so what a dispatcher knows about what is offerable still holds
        (a fleet's first check-ins after a restart would otherwise unmake it thousands of
        times over); the parked claims are looked at again."""
        self._once_a_unit("takers", "t", self._takers)

    def flight_changed(self, flight_id: str) -> None:
        held = getattr(self._local, "held", None)
        if held is not None:
            if flight_id not in held.flights:
                self._tell(f"f {flight_id}")
            held.flights.append(flight_id)
            return
        self._tell(f"f {flight_id}")
        self._after_commit(lambda: self._flight(flight_id))

    def event_added(self) -> None:
        self._once_a_unit("events", "e", self._event)

    def _once_a_unit(self, flag: str, line: str, raise_it: Callable[[], None]) -> None:
        """A signal without details: inside a held unit, noted on it (``Fired.<flag>``) and
        announced once per unit; otherwise announced now and raised after the commit."""
        held = getattr(self._local, "held", None)
        if held is not None:
            if not getattr(held, flag):
                self._tell(line)
            setattr(held, flag, True)
            return
        self._tell(line)
        self._after_commit(raise_it)

    def instruct(self, runner_id: str, kind: str) -> None:
        """Tell a runner something at once (an :class:`gg.domain.runners.Instruction`): the
        server holding its parked claim answers it with it
        (gg.server.dispatch.Dispatcher.instruct), whichever replica that is."""
        self._tell(f"i {runner_id} {kind}")
        held = getattr(self._local, "held", None)
        if held is not None:  # heard once the unit committed: what it changed is readable
            held.instructions.append((runner_id, kind))
            return
        self._after_commit(lambda: self._instruct(runner_id, kind))

    def heard(self, line: str) -> None:
        """Another replica's announcement (see the class): raised here, not announced again."""
        what, _, rest = line.partition(" ")
        if what == "r":
            self._ready()
        elif what == "t":
            self._takers()
        elif what == "f" and rest:
            self._flight(rest)
        elif what == "e":
            self._event()
        elif what == "i" and " " in rest:
            runner_id, kind = rest.split(" ", 1)
            self._instruct(runner_id, kind)

    def missed(self) -> None:
        for fn in self.on_missed:
            fn()

    def _after_commit(self, fn: Callable[[], None]) -> None:
        """``fn`` now, or once the write transaction this thread is in committed: whoever
        it wakes then reads what the change wrote."""
        if self.defer is None:
            fn()
        else:
            self.defer(fn)

    def _tell(self, line: str) -> None:
        if self.announce is not None:
            self.announce(line)

    def _on_loop(self, fn: Callable[..., None], *args: str) -> bool:
        """Whether ``fn(*args)`` was handed to the loop (this thread is not the loop's)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return False
        try:
            if asyncio.get_running_loop() is loop:
                return False
        except RuntimeError:
            pass
        loop.call_soon_threadsafe(fn, *args)
        return True

    def _ready(self) -> None:
        if not self._on_loop(self._ready):
            for fn in self.on_ready:
                fn()

    def _takers(self) -> None:
        if not self._on_loop(self._takers):
            for fn in self.on_takers:
                fn()

    def _flight(self, flight_id: str) -> None:
        if not self._on_loop(self._flight, flight_id):
            for fn in self.on_flight:
                fn(flight_id)

    def _event(self) -> None:
        if not self._on_loop(self._event):
            for fn in self.on_event:
                fn()

    def _instruct(self, runner_id: str, kind: str) -> None:
        if not self._on_loop(self._instruct, runner_id, kind):
            for fn in self.on_instruction:
                fn(runner_id, kind)

    def held(self, fn: Callable[[], T]) -> tuple[T, Fired]:
        """Run ``fn`` holding back the signals it raises; what it returned, and them."""
        fired = Fired()
        self._local.held = fired
        try:
            return fn(), fired
        finally:
            self._local.held = None

    def raise_all(self, fired: Fired) -> None:
        """A held unit's signals, raised here once it committed (announced already)."""
        if fired.ready:
            self._ready()
        if fired.takers:
            self._takers()
        for flight_id in dict.fromkeys(fired.flights):
            self._flight(flight_id)
        if fired.events:
            self._event()
        for runner_id, kind in dict.fromkeys(fired.instructions):
            self._instruct(runner_id, kind)


@dataclass(frozen=True)
class Wiring:
    """What one feature brings to another's use case, registered where the app is built
    (:func:`gg.control.wiring.wired`), never by importing a module: a Core built without it
    brings nothing into force when a gate clears and knows no provider of an environment.

    ``cleared``: per gate kind, what clearing a gate of that kind brings into force, run in
    order inside the clearing's transaction (:func:`gg.control.gates.clear_allowed`).
    ``providers``: what can serve an environment, each returning what serves it in words
    (``runner build-1``, ``pool ui-pool``) or nothing
    (:func:`gg.control.environments.providers_of`).
    """

    cleared: Mapping[str, tuple[Callable[[Core, Gate], None], ...]] = field(default_factory=dict)
    providers: tuple[Callable[[Core, str], list[str]], ...] = ()


@dataclass
class Core:
    store: Store
    settings: Settings
    clock: Callable[[], float] = time.time
    version: str = __version__
    commit: str = field(default_factory=build_commit)  # gg.build_commit: version skew
    signals: Signals = field(default_factory=Signals)
    wiring: Wiring = field(default_factory=Wiring)  # gg.control.wiring.wired(): the app's
    started_at: float = 0.0
    # This server process's name among replicas (duties, wake-ups): new at every start.
    replica: str = field(default_factory=lambda: secrets.token_hex(6))
    silence_scanned_at: float = 0.0
    key_nonce_secret: bytes | None = None  # the MAC key of nonces (gg.control.key_proof)
    verdicts: Verdicts = field(init=False)  # the meanings' verdicts (gg.control.verdicts)
    # what this replica remembers of start estimates (gg.control.estimates); memory only
    estimates: EstimateMemory = field(default_factory=EstimateMemory)
    credentials: CredentialCache = field(init=False)  # runner credential checks (its module)
    # heartbeats noted on the loop, written together by the writer (gg.control.heartbeats)
    heartbeats: HeartbeatWrites = field(default_factory=HeartbeatWrites)

    loop: asyncio.AbstractEventLoop | None = None
    # The group commit's last step (the dispatcher's pass for parked claims), run by the
    # writer inside a group whose units made a flight ready; returns what to do after the
    # commit (told whether it held), or None.
    tail: Callable[[], Callable[[bool], None] | None] | None = None
    _group_ready: bool = False

    def __post_init__(self) -> None:
        self.verdicts = Verdicts(self.settings.meaning_deadline)
        self.credentials = CredentialCache(self.settings.credential_cache_size,
                                           self.settings.credential_cache_ttl,
                                           lambda: self.clock())
        self.store.db.writer.before_commit = self._before_commit
        self.store.db.writer.before_commit_due = self._before_commit_due
        self.signals.defer = self.store.db.after_commit

    async def run(self, fn: Callable[..., T], *args: Any, durable: bool = True,
                  **kwargs: Any) -> T:
        """``fn(core, *args, **kwargs)`` on the store's writer, in its next group commit;
        what it returned, once that commit is durable (the event loop is not blocked).

        Any use case can be run so, unchanged: its ``store.atomic()`` blocks become a
        savepoint of the group, and its signals are raised on the loop after the commit.
        ``durable=False`` for changes whose loss on a power cut is harmless (output facts):
        such a group skips the fsync when nothing durable rides in it."""
        result, _ = await asyncio.wrap_future(self.soon(fn, *args, durable=durable, **kwargs))
        return result

    def soon(self, fn: Callable[..., T], *args: Any, durable: bool = True,
             **kwargs: Any) -> Future:
        """:meth:`run` without waiting (called on the event loop): the writer's future of
        (what ``fn`` returned, its signals), resolved after the commit; the signals are
        raised on the loop after the commit whoever waits."""
        loop = self.loop = asyncio.get_running_loop()

        def unit() -> tuple[T, Fired]:
            result, fired = self.signals.held(lambda: fn(self, *args, **kwargs))
            if fired.ready:
                self._group_ready = True
            return result, fired

        future = self.store.db.submit(unit, durable=durable)
        future.add_done_callback(lambda f: self._after(loop, f))
        return future

    def _after(self, loop: asyncio.AbstractEventLoop, future: Future) -> None:
        """The group committed: raise the unit's signals on the loop (even when its caller
        is gone, so that a committed flight is never left unoffered)."""
        if future.cancelled() or future.exception() is not None:
            return
        _, fired = future.result()
        loop.call_soon_threadsafe(self.signals.raise_all, fired)

    def _before_commit_due(self) -> bool:
        """Whether the group's last step has anything to do (a unit made a flight ready and
        claims may be parked): otherwise the writer takes no savepoint for it."""
        if self._group_ready and self.tail is not None and self.loop is not None:
            return True
        self._group_ready = False
        return False

    def _before_commit(self) -> Callable[[bool], None] | None:
        ready, self._group_ready = self._group_ready, False
        if not ready or self.tail is None or self.loop is None:
            return None
        told, fired = self.signals.held(self.tail)
        loop = self.loop

        def after(ok: bool) -> None:
            if ok:
                loop.call_soon_threadsafe(self.signals.raise_all, fired)
            if told is not None:
                told(ok)

        return after

    def now(self) -> float:
        return self.clock()

    def runner_again(self, runner_id: str) -> Runner:
        """A runner's row read again after a use case changed it in its transaction: there,
        unless the runner was forgotten meanwhile (then the use case answers 404)."""
        runner = self.store.runner(runner_id)
        if runner is None:
            raise NotFound(f"runner {runner_id} is no longer registered")
        return runner

    def event(self, kind: EventKind, *, actor: str | None = None, runner_id: str | None = None,
              flight_id: str | None = None, at: float | None = None, **body) -> None:
        kind = EventKind(kind)
        at = self.now() if at is None else at
        with self.store.atomic():  # the event and its hooks' outbox rows: one transaction
            then = None
            if kind.value in hook_rules.NAME_OF:
                then = self._queue_for_hooks(dict(kind=kind.value, at=at, actor=actor,
                                                  runner_id=runner_id, flight_id=flight_id,
                                                  body=body))
            # its seq is known once its row is in (on PostgreSQL at the commit, in commit order)
            self.store.add_event(kind.value, at, actor=actor, runner_id=runner_id,
                                 flight_id=flight_id, body=body, then=then)
            # what it recorded wakes whoever follows the events, once it is committed
            self.signals.event_added()

    def _queue_for_hooks(self, event: dict) -> Callable[[int], None] | None:
        """What writes an outbox row for every hook that hears ``event`` (gg.domain.hooks),
        once its seq is known; None when no hook hears it. The hooks are read now."""
        hooks = self.store.hooks()
        if not hooks:
            return None
        flight_id = event["flight_id"]
        environment = self.store.flight_environment(flight_id) if flight_id else None
        hearing = [h for h in hooks if hook_rules.hears(h, event["kind"], environment)]
        if not hearing:
            return None
        now = self.now()

        def queue(seq: int) -> None:
            for hook in hearing:
                delivery_id = hook_rules.new_delivery_id()
                self.store.add_hook_delivery(
                    id=delivery_id, hook_id=hook["id"], event_seq=seq, kind=event["kind"],
                    flight_id=flight_id, now=now,
                    body=hook_rules.body(delivery_id=delivery_id, hook_id=hook["id"],
                                         event=event | {"seq": seq}, environment=environment))

        return queue
