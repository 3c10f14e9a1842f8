"""Opening and clearing gates, and holding flights back behind them.

What a gate brings into force when it clears depends on its kind; each owner's hook is
listed in ``gg.control.wiring.wired`` (environments, profiles, strategies, maintenance,
approvals) and handed to the use cases as ``core.wiring.cleared``. Clearing a
gate also releases every flight held behind it: a gated flight with no other open gate
becomes ``ready`` in the same transaction, and parked runners are woken.
"""

from __future__ import annotations

from gg.control.core import Core
from gg.control.lifecycle import move
from gg.domain import tokens
from gg.domain.events import EventKind
from gg.domain.flights import Event, Stage
from gg.domain.gates import CLEARERS, STATUSES, Gate, refusal_to_clear
from gg.domain.people import Person
from gg.errors import BadRequest, Forbidden, NotFound


def open_gate(core: Core, *, kind: str, subject: str, guards: str, why: str, clearer: str,
              actor: str | None, runner_id: str | None = None, flight_id: str | None = None,
              payload: dict | None = None) -> Gate:
    """Open a gate (inside the caller's transaction); a newer gate supersedes an open one
    on the same subject, and the flights it held move behind the new one."""
    if clearer not in CLEARERS:
        raise BadRequest(f"clearer must be one of {', '.join(CLEARERS)}")
    now = core.now()
    gate = Gate(id=tokens.new_id("g_"), kind=kind, subject=subject, guards=guards, why=why,
                clearer=clearer, opened_at=now, opened_by=actor, runner_id=runner_id,
                flight_id=flight_id, payload=payload or {})
    held: list[str] = []
    for old in core.store.gates(subject=subject, status="open"):
        core.store.update_gate(old.id, status="superseded", cleared_at=now, cleared_by=actor)
        held.extend(core.store.flights_behind(old.id))
    core.store.insert_gate(gate)
    core.event(EventKind.GATE_OPENED, actor=actor, runner_id=runner_id, flight_id=flight_id, at=now,
               gate=gate.id, gate_kind=kind, subject=subject, guards=guards)
    if held:
        hold_flights(core, gate.id, held)
    return gate


def hold_flights(core: Core, gate_id: str, flight_ids: list[str]) -> int:
    """Put flights behind a gate: ready ones become gated (inside the caller's transaction)."""
    held = 0
    for flight_id in flight_ids:
        flight = core.store.flight(flight_id)
        if flight is None or flight.final or flight.stage == Stage.FLYING.value:
            continue
        gates = [g for g in flight.gates if g != gate_id] + [gate_id]
        if move(core, flight, Event.GATED, core.now(), gates=gates) is not None:
            held += 1
    return held


def clear_gate(core: Core, gate_id: str, *, person: Person | None = None,
               runner_id: str | None = None) -> Gate:
    with core.store.atomic():
        gate = core.store.gate(gate_id)
        if gate is None:
            raise NotFound(f"no gate {gate_id}")
        refusal = refusal_to_clear(gate, person=person, runner_id=runner_id,
                                   flight_opener=opener_of(core, gate))
        if refusal:
            raise Forbidden(refusal)
        actor = person.name if person else f"runner:{runner_id}"
        gate, released = clear_allowed(core, gate, actor)
    if released:
        core.signals.ready_changed()
    return gate


def opener_of(core: Core, gate: Gate) -> str | None:
    """The id of the person who opened the flight ``gate`` holds (None: it holds none)."""
    flight = core.store.flight(gate.flight_id) if gate.flight_id else None
    return flight.opened_by if flight else None


def clear_allowed(core: Core, gate: Gate, actor: str) -> tuple[Gate, int]:
    """Clear an open gate whose clearing the caller has allowed (inside its transaction):
    record it, bring into force what its kind brings, release the flights it held. The
    cleared gate and how many flights became ready."""
    now = core.now()
    core.store.update_gate(gate.id, status="cleared", cleared_at=now, cleared_by=actor)
    cleared = core.store.gate(gate.id)
    assert cleared is not None, "gates are never deleted"
    gate = cleared
    core.event(EventKind.GATE_CLEARED, actor=actor, runner_id=gate.runner_id,
               flight_id=gate.flight_id, at=now, gate=gate.id, gate_kind=gate.kind,
               subject=gate.subject)
    for hook in core.wiring.cleared.get(gate.kind, ()):
        hook(core, gate)
    return gate, release_flights(core, gate.id)


def release_flights(core: Core, gate_id: str) -> int:
    """Flights behind a cleared gate with no other open gate become ready."""
    released = 0
    for flight_id in core.store.flights_behind(gate_id):
        flight = core.store.flight(flight_id)
        assert flight is not None, "found behind the gate just now, in this transaction"
        remaining = [g for g in flight.gates if g != gate_id]
        still_open = core.store.open_gate_ids(remaining)
        if not still_open and flight.stage == Stage.GATED.value:
            if move(core, flight, Event.UNGATED, core.now()) is not None:
                released += 1
        else:
            core.store.update_flight(flight_id, gates=[g for g in remaining if g in still_open])
        core.signals.flight_changed(flight_id)
    return released


def view(core: Core, gate: Gate) -> dict:
    data = {k: getattr(gate, k) for k in ("id", "kind", "subject", "guards", "why", "clearer",
                                          "status", "opened_at", "opened_by", "cleared_at",
                                          "cleared_by", "runner_id", "flight_id", "payload")}
    data["who_may_clear"] = gate.cleared_by_words
    data["flights_held"] = core.store.flights_behind(gate.id) if gate.open else []
    return data


def list_gates(core: Core, status: str | None = "open") -> list[dict]:
    if status is not None and status not in STATUSES:
        raise BadRequest(f"status must be one of {', '.join(STATUSES)}")
    return [view(core, g) for g in core.store.gates(status=status)]
