"""Flights and their stages: the lifecycle is one table.

::

              ungated (last gate cleared)
     gated  ------------------------------>  ready  <--------------------------------+
       |   <------------------------------    |      returned (hand-back), expired    |
       |        gated (a gate holds it)       |      (< MAX_EXPIRIES times), or       |
       |                                      |      failed with a retry left         |
       |                               granted|                                       |
       |                                      v                                       |
       |                                   flying ------------------------------------+
       |                                      |   (renewed keeps it flying)
       |       landed / failed (hand-back), or expired MAX_EXPIRIES times
       |                                      v
       +-----> cancelled          landed | failed | cancelled      (final: never runs again)

Every edge, as :data:`TRANSITIONS` holds it (a test checks this list and the one in
docs/architecture.md against the table)::

    gated  --gated-->     gated      another gate holds it too
    ready  --gated-->     gated      a gate holds it back
    gated  --ungated-->   ready      its last open gate cleared
    ready  --granted-->   flying     a runner was granted a lease (epoch + 1)
    flying --renewed-->   flying     the holder renewed its lease
    flying --returned-->  ready      the holder handed it back: this machine could not do it
    flying --expired-->   ready      the lease ran out (fewer than MAX_EXPIRIES times)
    flying --expired-->   failed     the lease ran out MAX_EXPIRIES times
    flying --landed-->    landed     the holder handed it back: done
    flying --failed-->    failed     the holder handed it back: the work failed
    flying --failed-->    ready      ... and a retry is left (gg.domain.retries.decide)
    gated  --cancelled--> cancelled
    ready  --cancelled--> cancelled
    flying --cancelled--> cancelled
    gated  --not_taken--> failed     attended, and its runner did not take it in time
    ready  --not_taken--> failed
    gated  --confirmed--> landed     maintenance: the machine confirmed every missing item
    ready  --confirmed--> landed

:func:`transition` is the only place that says which changes exist: it turns a flight and
an :class:`Event` into a :class:`Change` (the stage to move to, the fields to set, the fact
to append, the audit events to record) or raises :class:`IllegalTransition`. The store
applies a change as one compare-and-set on (stage, epoch) (``Store.apply_flight_change``),
so a change decided on a stale reading is not applied. Opening a flight is not an edge: it
is born ``gated`` or ``ready`` (:func:`opened`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from gg.domain.events import EventKind, flight_ended
from gg.domain.flight_spec import FlightSpec
from gg.domain.flight_spec import Priority as Priority  # named here too: what orders a flight
from gg.domain.retries import Decision
from gg.error_codes import ErrorCode
from gg.errors import Conflict


class Stage(StrEnum):
    GATED = "gated"
    READY = "ready"
    FLYING = "flying"
    LANDED = "landed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self in (Stage.LANDED, Stage.FAILED, Stage.CANCELLED)


STAGES = tuple(s.value for s in Stage)


class Outcome(StrEnum):
    """What a runner says when it hands a flight back."""

    LANDED = "landed"  # work done, exit 0
    FAILED = "failed"  # work ran and failed; retried only if its retries say so
    RETURNED = "returned"  # this machine could not do it; back to ready for another


def priority_refusal(priority: str, *, admin: bool, high_for: str) -> str | None:
    """Why this person may not open a flight at ``priority`` (None: they may). ``high_for``
    is the server's GG_HIGH_PRIORITY: ``admins`` or ``everyone``."""
    if Priority(priority) is Priority.HIGH and not admin and high_for != "everyone":
        return "only an admin may open a flight with priority high on this server"
    return None


FACT_KINDS = ("started", "output", "exit", "commit", "pushed", "note", "expired", "returned")


@dataclass
class Flight:
    id: str
    command: list[str]
    opened_by: str
    opened_at: float
    stage: Stage = Stage.READY
    title: str = ""
    environment: str | None = None
    requires: dict[str, str] = field(default_factory=dict)
    runner_target: str | None = None
    attended: bool = False
    repo: str | None = None
    agent: str = "shell"
    kind: str = "work"
    priority: str = Priority.NORMAL.value
    epoch: int = 0
    lease_runner: str | None = None
    lease_granted_at: float | None = None
    lease_expires_at: float | None = None
    attempt: int = 0
    expiries: int = 0
    outcome: str | None = None
    exit_code: int | None = None
    ended_at: float | None = None
    ended_reason: str | None = None
    gates: list[str] = field(default_factory=list)
    timeout: float | None = None  # seconds each attempt may run (gg.domain.timeouts)
    output_limit: int | None = None  # bytes of output stored at most (gg.domain.output)
    output_bytes: int = 0  # bytes of output stored so far
    service: dict[str, Any] | None = None  # kind service: its spec (gg.domain.services)
    group: str | None = None  # placed in this runner group only (gg.domain.groups)
    where: dict[str, str] = field(default_factory=dict)  # attributes its runner's group must have

    def __post_init__(self) -> None:
        self.stage = Stage(self.stage)  # a row's text becomes the enum (it compares as text)

    @property
    def final(self) -> bool:
        return self.stage.final

    @property
    def spec(self) -> FlightSpec:
        """What its opener chose, as the flight holds it (settled: see :class:`FlightSpec`)."""
        return FlightSpec.from_row(self.__dict__)


# --------------------------------------------------------------------------- the lifecycle


class Event(StrEnum):
    """What happens to a flight; each is an edge (or several) of :data:`TRANSITIONS`."""

    GATED = "gated"  # a gate holds it back
    UNGATED = "ungated"  # its last open gate cleared
    GRANTED = "granted"  # a runner was granted a lease
    RENEWED = "renewed"  # the holder renewed its lease
    RETURNED = "returned"  # hand-back: this machine could not do it
    EXPIRED = "expired"  # the lease ran out (noticed by whoever looked first)
    LANDED = "landed"  # hand-back: done
    FAILED = "failed"  # hand-back: the work failed
    CANCELLED = "cancelled"  # its opener or an admin cancelled it
    NOT_TAKEN = "not_taken"  # attended, and its runner did not take it in time
    CONFIRMED = "confirmed"  # maintenance: the machine confirmed every missing item


TRANSITIONS: frozenset[tuple[Stage, Event, Stage]] = frozenset({
    (Stage.GATED, Event.GATED, Stage.GATED),
    (Stage.READY, Event.GATED, Stage.GATED),
    (Stage.GATED, Event.UNGATED, Stage.READY),
    (Stage.READY, Event.GRANTED, Stage.FLYING),
    (Stage.FLYING, Event.RENEWED, Stage.FLYING),
    (Stage.FLYING, Event.RETURNED, Stage.READY),
    (Stage.FLYING, Event.EXPIRED, Stage.READY),
    (Stage.FLYING, Event.EXPIRED, Stage.FAILED),
    (Stage.FLYING, Event.LANDED, Stage.LANDED),
    (Stage.FLYING, Event.FAILED, Stage.FAILED),
    (Stage.FLYING, Event.FAILED, Stage.READY),
    (Stage.GATED, Event.CANCELLED, Stage.CANCELLED),
    (Stage.READY, Event.CANCELLED, Stage.CANCELLED),
    (Stage.FLYING, Event.CANCELLED, Stage.CANCELLED),
    (Stage.GATED, Event.NOT_TAKEN, Stage.FAILED),
    (Stage.READY, Event.NOT_TAKEN, Stage.FAILED),
    (Stage.GATED, Event.CONFIRMED, Stage.LANDED),
    (Stage.READY, Event.CONFIRMED, Stage.LANDED),
})

NOT_TAKEN = "not taken promptly"  # the ended reason of an attended flight nobody took


class IllegalTransition(Conflict):
    """``event`` cannot happen to a flight in its stage (no edge in :data:`TRANSITIONS`)."""

    code = ErrorCode.ILLEGAL_TRANSITION

    def __init__(self, stage: str, event: Event):
        super().__init__(f"a {Stage(stage).value} flight cannot be {Event(event).value}")
        self.stage, self.event = Stage(stage), Event(event)


@dataclass(frozen=True)
class Grant:
    flight_id: str
    runner_id: str
    epoch: int
    granted_at: float
    expires_at: float


@dataclass(frozen=True)
class Fact:
    """A fact to append to the flight's history with the change."""

    kind: str
    body: dict[str, Any]
    epoch: int
    runner_id: str | None = None
    key: str | None = None  # the hand-back's idempotency key


@dataclass(frozen=True)
class Record:
    """An audit event to record with the change (``flight_id`` is the flight's)."""

    kind: EventKind
    actor: str | None
    runner_id: str | None = None
    body: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """What one event does to one flight: applied whole, or (on a stale reading) not at all."""

    event: Event
    to: Stage
    values: dict[str, Any] = field(default_factory=dict)  # the other fields to set
    fact: Fact | None = None
    records: tuple[Record, ...] = ()
    grant: Grant | None = None  # a new lease: the store remembers who held which epoch


def edges(stage: str, event: Event) -> frozenset[Stage]:
    """The stages ``event`` may move a ``stage`` flight to (empty: it may not happen)."""
    return frozenset(t for s, e, t in TRANSITIONS if s == stage and e == event)


def changed(flight: Flight, change: Change) -> Flight:
    """``flight`` as ``change`` leaves it: what the store's compare-and-set wrote, so a
    caller that applied it need not read the row again."""
    return replace(flight, **{**change.values, "stage": Stage(change.to).value})


def opened(spec: FlightSpec, *, held: bool, **record: Any) -> Flight:
    """A new flight of a settled ``spec``: born ``gated`` when something holds it back, else
    ``ready``. ``record`` is the rest of its record (id, opener, time, gates)."""
    return Flight(stage=Stage.GATED if held else Stage.READY, **spec.to_row(), **record)


def after_expiry(flight: Flight, max_expiries: int) -> tuple[str, int, str | None]:
    """(stage, expiries, ended_reason) once the lease on ``flight`` has expired."""
    expiries = flight.expiries + 1
    if expiries >= max_expiries:
        return Stage.FAILED.value, expiries, f"lost {expiries} times"
    return Stage.READY.value, expiries, None


def next_lease(flight: Flight, runner_id: str, now: float, ttl: float) -> Grant:
    return Grant(flight.id, runner_id, flight.epoch + 1, now, now + ttl)


def transition(flight: Flight, event: Event, now: float, *, actor: str | None = None,
               **details: Any) -> Change:
    """The change ``event`` makes to ``flight`` at ``now``, or :class:`IllegalTransition`.

    ``details`` by event: ``gates`` (gated); ``runner_id``, ``ttl`` (granted); ``ttl``
    (renewed); ``runner_id``, ``exit_code``, ``reason``, ``key`` (returned, landed, failed),
    and ``retry`` (failed: a :class:`gg.domain.retries.Decision`, the attempt is retried);
    ``max_expiries`` (expired); ``reason``, ``dependency`` (cancelled); ``runner_name``,
    ``claim_wait`` (not_taken). ``actor`` names who made it happen in the audit events.
    """
    event = Event(event)
    targets = edges(flight.stage, event)
    if not targets:
        raise IllegalTransition(flight.stage, event)
    make = _CHANGES[event]
    change = make(flight, now, actor, **details)
    assert change.to in targets, (flight.stage, event, change.to)
    return change


def _gated(flight: Flight, now: float, actor: str | None, *, gates: list[str]) -> Change:
    return Change(Event.GATED, Stage.GATED, {"gates": list(gates)})


def _ungated(flight: Flight, now: float, actor: str | None) -> Change:
    return Change(Event.UNGATED, Stage.READY, {"gates": []})


def _granted(flight: Flight, now: float, actor: str | None, *, runner_id: str,
             ttl: float) -> Change:
    lease = next_lease(flight, runner_id, now, ttl)
    values = {"epoch": lease.epoch, "lease_runner": runner_id, "lease_granted_at": now,
              "lease_expires_at": lease.expires_at, "attempt": flight.attempt + 1}
    record = Record(EventKind.FLIGHT_CLAIMED, actor, runner_id,
                    {"epoch": lease.epoch, "attempt": flight.attempt + 1})
    return Change(Event.GRANTED, Stage.FLYING, values, records=(record,), grant=lease)


def _renewed(flight: Flight, now: float, actor: str | None, *, ttl: float) -> Change:
    return Change(Event.RENEWED, Stage.FLYING, {"lease_expires_at": now + ttl})


def _handed_back(event: Event) -> Callable[..., Change]:
    def make(flight: Flight, now: float, actor: str | None, *, runner_id: str,
             exit_code: int | None = None, reason: str | None = None,
             key: str | None = None, retry: Decision | None = None) -> Change:
        body = {"outcome": event.value, "exit_code": exit_code, "reason": reason}
        if retry is not None:  # a failed attempt with a retry left: ready for a new attempt
            assert event is Event.FAILED, event
            body["retry"] = retry.text
            fact = Fact("exit", body, flight.epoch, runner_id, key)
            record = Record(EventKind.FLIGHT_RETRIED, actor, runner_id,
                            {"epoch": flight.epoch, "retry": retry.number, "of": retry.of,
                             "exit_code": exit_code, "reason": reason,
                             "offer_at": retry.offer_at})
            return Change(event, Stage.READY, {"lease_expires_at": None}, fact, (record,))
        if event is Event.RETURNED:
            fact = Fact("returned", body, flight.epoch, runner_id, key)
            record = Record(EventKind.FLIGHT_RETURNED, actor, runner_id, {"reason": reason})
            return Change(event, Stage.READY, {"lease_expires_at": None}, fact, (record,))
        fact = Fact("exit", body, flight.epoch, runner_id, key)
        values = {"outcome": event.value, "exit_code": exit_code, "ended_at": now,
                  "ended_reason": reason, "lease_expires_at": None}
        record = Record(flight_ended(event.value), actor, runner_id, {"exit_code": exit_code})
        return Change(event, Stage(event.value), values, fact, (record,))
    return make


def _expired(flight: Flight, now: float, actor: str | None, *, max_expiries: int) -> Change:
    stage, expiries, reason = after_expiry(flight, max_expiries)
    values: dict[str, Any] = {"expiries": expiries, "lease_expires_at": None}
    fact = Fact("expired", {"runner": flight.lease_runner, "expired_at": flight.lease_expires_at,
                            "expiries": expiries}, flight.epoch)
    records = [Record(EventKind.FLIGHT_EXPIRED, actor, flight.lease_runner,
                      {"epoch": flight.epoch, "expiries": expiries})]
    if stage == Stage.FAILED.value:
        values.update(outcome=Outcome.FAILED.value, ended_at=now, ended_reason=reason)
        records.append(Record(EventKind.FLIGHT_FAILED, actor, None, {"reason": reason}))
    return Change(Event.EXPIRED, Stage(stage), values, fact, tuple(records))


def _cancelled(flight: Flight, now: float, actor: str | None, *, reason: str,
               dependency: str | None = None) -> Change:
    values = {"outcome": "cancelled", "ended_at": now, "ended_reason": reason}
    body: dict[str, Any] = {"was": flight.stage}
    if dependency is not None:  # --after: the dependency that failed first, and how
        body.update(reason=reason, dependency=dependency)
    record = Record(EventKind.FLIGHT_CANCELLED, actor, None, body)
    return Change(Event.CANCELLED, Stage.CANCELLED, values, records=(record,))


def _not_taken(flight: Flight, now: float, actor: str | None, *, runner_name: str,
               claim_wait: float) -> Change:
    values = {"outcome": Outcome.FAILED.value, "ended_at": now, "ended_reason": NOT_TAKEN}
    fact = Fact("note", {"text": f"{NOT_TAKEN}: runner {runner_name} did not take this "
                                 f"attended flight within {claim_wait:g}s"}, flight.epoch)
    record = Record(EventKind.FLIGHT_FAILED, actor, flight.runner_target, {"reason": NOT_TAKEN})
    return Change(Event.NOT_TAKEN, Stage.FAILED, values, fact, (record,))


def _confirmed(flight: Flight, now: float, actor: str | None) -> Change:
    reason = "the machine confirmed every missing item"
    values = {"outcome": Outcome.LANDED.value, "exit_code": 0, "ended_at": now,
              "ended_reason": reason, "gates": []}
    fact = Fact("note", {"text": reason}, 0)
    record = Record(EventKind.FLIGHT_LANDED, actor, flight.runner_target,
                    {"exit_code": 0, "flight_kind": flight.kind})
    return Change(Event.CONFIRMED, Stage.LANDED, values, fact, (record,))


_CHANGES: dict[Event, Callable[..., Change]] = {
    Event.GATED: _gated,
    Event.UNGATED: _ungated,
    Event.GRANTED: _granted,
    Event.RENEWED: _renewed,
    Event.RETURNED: _handed_back(Event.RETURNED),
    Event.EXPIRED: _expired,
    Event.LANDED: _handed_back(Event.LANDED),
    Event.FAILED: _handed_back(Event.FAILED),
    Event.CANCELLED: _cancelled,
    Event.NOT_TAKEN: _not_taken,
    Event.CONFIRMED: _confirmed,
}
