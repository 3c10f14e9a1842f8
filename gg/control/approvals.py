"""The action queue: approve, reject or force what waits for a person (gg.domain.approvals).

An approval is a gate of kind ``approval`` (clearer ``approver``) opened with its flight, in
the transaction that opens it; approving clears it through the gate machinery, so
``gg approve F`` and ``gg gate clear G`` obey one rule and record the same events. Rejecting
closes the gate ``rejected`` and moves the flight to ``cancelled`` through the lifecycle.
Forcing clears, at once, every open gate on a flight that a person may clear.

Each approval gate stands for one digest (gg.domain.specs). :func:`change` is the one way a
flight's spec changes: at once where no approval covers the flight, else the waiting
flight's gate is superseded by one for the new spec, or the approved flight's change waits
as a proposal in its own gate, applied when that gate clears.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gg.control.core import Core
from gg.control.gates import clear_allowed, open_gate
from gg.control.lifecycle import move
from gg.control.people import require_admin
from gg.domain import approvals, specs
from gg.domain.events import EventKind
from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import Event, Flight, Stage
from gg.domain.gates import Gate, refusal_to_clear
from gg.domain.people import Person
from gg.error_codes import ErrorCode
from gg.errors import BadRequest, Conflict, Forbidden, NotFound

PERSON_CLEARERS = ("admin", "opener", approvals.CLEARER)  # gates a person may clear


def gate_for_new_flight(core: Core, person: Person, *, flight_id: str, asked: bool,
                        approver: str | None, environment: str | None,
                        digest: str) -> str | None:
    """Open the approval gate of a flight being opened, when it needs one (inside the
    caller's transaction), for the spec whose ``digest`` is given; its id, or None."""
    approver_row = None
    if approver is not None:
        approver_row = core.store.person_by_name(approver)
        refusal = approvals.refusal_to_name_approver(person, approver_row, approver)
        if refusal:
            raise BadRequest(refusal, code=ErrorCode.INVALID_APPROVER)
    asked = asked or approver is not None
    root = core.store.root_envelope() if environment else None
    env_requires = bool(environment and core.store.environment_requires_approval(environment))
    if not approvals.needed(asked=asked, environment=environment,
                            environment_requires=env_requires,
                            root_approvals=root.approvals if root else ()):
        return None
    name = approver_row.name if approver_row else None
    gate = open_gate(core, kind=approvals.KIND, subject=approvals.subject(flight_id),
                     guards=approvals.guards(flight_id),
                     why=approvals.why(asked=asked, approver_name=name, environment=environment,
                                       environment_requires=env_requires),
                     clearer=approvals.CLEARER, actor=person.name, flight_id=flight_id,
                     payload={"approver": approver_row.id if approver_row else None,
                              "approver_name": name, "digest": digest})
    return gate.id


def as_asked(core: Core, flight: Flight) -> Flight:
    """The flight as its latest change asked for it: with the spec its open proposal
    carries, if one waits for approval (a change builds on the one before it)."""
    proposal = _open_proposal(core, flight.id)
    return replace(flight, **proposal.payload["proposed"]) if proposal else flight


def _open_proposal(core: Core, flight_id: str) -> Gate | None:
    return next((g for g in core.store.flight_gates(flight_id, kind=approvals.KIND)
                 if g.payload.get("proposed") is not None), None)


def change(core: Core, person: Person, flight: Flight, spec: FlightSpec) -> Gate | None:
    """Change the spec of ``flight`` to ``spec`` (settled, built on :func:`as_asked`: it
    holds any change still waiting for approval) inside the caller's transaction. Where no
    approval covers the flight it changes at once (None); else the approval gate that now
    waits for the new spec."""
    values = spec.row_changes(flight.__dict__)
    gates = core.store.flight_gates(flight.id, kind=approvals.KIND, status=None)
    env = flight.environment
    root = core.store.root_envelope() if env else None
    if not approvals.change_needs_approval(
            ever_gated=bool(gates), environment=env,
            environment_requires=bool(env and core.store.environment_requires_approval(env)),
            root_approvals=root.approvals if root else ()):
        core.store.update_flight(flight.id, **values)
        return None
    waiting = next((g for g in gates if g.open), None)
    payload: dict[str, Any] = {key: gates[0].payload.get(key) if gates else None
               for key in ("approver", "approver_name")}
    payload.update(changed_by=person.id, changed_by_name=person.name)
    before = specs.what_runs(flight)
    if waiting is not None and waiting.id in flight.gates and flight.stage == Stage.GATED:
        # Never approved: nothing of it ran, so the spec itself changes, and the approver
        # is asked about the new one (with every change since the flight was opened).
        core.store.update_flight(flight.id, **values)
        after = specs.what_runs(spec)
        payload["changes"] = list(waiting.payload.get("changes") or []) + specs.changes(before,
                                                                                         after)
        guards, approved = approvals.guards(flight.id), False
    else:
        # Approved (or opened before its environment required approvals): it keeps what it
        # runs, and the change waits as a proposal (the spec holds any proposal before it).
        proposed = values
        after = specs.what_runs(spec)
        payload.update(proposed=proposed, approved_digest=specs.digest(before),
                       changes=specs.changes(before, after))
        guards, approved = approvals.guards_change(flight.id), True
    payload["digest"] = specs.digest(after)
    return open_gate(core, kind=approvals.KIND, subject=approvals.subject(flight.id),
                     guards=guards, clearer=approvals.CLEARER, actor=person.name,
                     why=approvals.why_changed(changed_by=person.name, approved=approved,
                                               changes=payload["changes"]),
                     flight_id=flight.id, payload=payload)


def approved(core: Core, gate: Gate) -> None:
    proposed = gate.payload.get("proposed")
    if proposed is not None:  # a change approved: the flight runs it from now on
        flight = core.store.flight(gate.flight_id) if gate.flight_id else None
        if flight is not None and not flight.final:
            core.store.update_flight(flight.id, **proposed)
    core.event(EventKind.FLIGHT_APPROVED, actor=gate.cleared_by, flight_id=gate.flight_id,
               gate=gate.id, digest=gate.payload.get("digest"),
               change=proposed is not None)


def approval_view(core: Core, flight: Flight) -> dict:
    """What a flight runs (its digest), the latest approval given and the one it waits for,
    with the spec approving it runs and what changed (``gg show``, the console)."""
    gates = core.store.flight_gates(flight.id, kind=approvals.KIND, status=None)
    given = next((g for g in gates if g.status == "cleared"), None)
    waiting = next((g for g in gates if g.open), None)
    out: dict = {"digest": specs.digest(specs.what_runs(flight)), "approved": None,
                 "waiting": None}
    if given is not None:
        out["approved"] = {"gate": given.id, "digest": digest_of(given, flight),
                           "by": given.cleared_by, "at": given.cleared_at}
    if waiting is not None:
        out["waiting"] = {"gate": waiting.id, "who_may_clear": waiting.cleared_by_words,
                          **asked_for(waiting, flight)}
    return out


def asked_for(gate: Gate, flight: Flight) -> dict:
    """What approving an open approval gate runs: the digest and command of the spec it
    stands for, what changed (and who changed it), whether it is a change to an approved
    flight."""
    proposed = gate.payload.get("proposed")
    asked = replace(flight, **proposed) if proposed is not None else flight
    return {"digest": digest_of(gate, asked), "command": specs.what_runs(asked)["command"],
            "changes": list(gate.payload.get("changes") or []),
            "changed_by": gate.payload.get("changed_by_name"), "change": proposed is not None}


def _flight(core: Core, flight_id: str) -> Flight:
    flight = core.store.flight(flight_id)
    if flight is None:
        raise NotFound(f"no flight {flight_id}")
    return flight


def _approval_gate(core: Core, flight: Flight) -> Gate:
    gates = core.store.flight_gates(flight.id, kind=approvals.KIND, status=None)
    if not gates:
        raise Conflict(f"flight {flight.id} does not wait for an approval",
                       code=ErrorCode.NO_APPROVAL)
    gate = next((g for g in gates if g.open), gates[0])
    if not gate.open:
        raise Conflict(f"the approval of flight {flight.id} is {gate.status} already "
                       f"(by {gate.cleared_by})", code=ErrorCode.NO_APPROVAL)
    return gate


def digest_of(gate: Gate, flight: Flight) -> str:
    """The digest an approval gate stands for (a gate opened before digests were recorded:
    the flight's spec as it is)."""
    return gate.payload.get("digest") or specs.digest(specs.what_runs(flight))


def approve(core: Core, person: Person, flight_id: str, digest: str | None = None) -> Flight:
    """Approve what a flight's open approval gate stands for; with ``digest``, only if that
    is still what it stands for (what the approver was shown)."""
    with core.store.atomic():
        flight = _flight(core, flight_id)
        gate = _approval_gate(core, flight)
        refusal = refusal_to_clear(gate, person=person, flight_opener=flight.opened_by)
        if refusal:
            raise Forbidden(refusal)
        refusal = approvals.digest_refusal(flight_id, wanted=digest_of(gate, flight),
                                           given=digest)
        if refusal:
            raise Conflict(refusal, code=ErrorCode.APPROVAL_CHANGED)
        _, released = clear_allowed(core, gate, person.name)
    _signal(core, flight_id, released)
    return _flight(core, flight_id)


def reject(core: Core, person: Person, flight_id: str, reason: str | None = None) -> Flight:
    now = core.now()
    with core.store.atomic():
        flight = _flight(core, flight_id)
        gate = _approval_gate(core, flight)
        refusal = approvals.refusal_to_reject(person, flight_id=flight_id,
                                              approver=gate.payload.get("approver"),
                                              approver_name=gate.payload.get("approver_name"))
        if refusal:
            raise Forbidden(refusal)
        core.store.update_gate(gate.id, status="rejected", cleared_at=now,
                               cleared_by=person.name)
        change_only = gate.payload.get("proposed") is not None
        if not change_only:  # a refused change leaves the flight running what was approved
            move(core, flight, Event.CANCELLED, now, actor=person.name,
                 reason=approvals.rejected_reason(person.name, reason))
        core.event(EventKind.FLIGHT_REJECTED, actor=person.name, flight_id=flight_id, at=now,
                   gate=gate.id, reason=reason, digest=gate.payload.get("digest"),
                   change=change_only)
    _signal(core, flight_id, 0)
    return _flight(core, flight_id)


def force(core: Core, person: Person, flight_id: str) -> tuple[Flight, list[str]]:
    """Clear every open gate on the flight that a person may clear (admin); the flight and
    the ids of the gates cleared."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        flight = _flight(core, flight_id)
        if flight.final:
            raise Conflict(f"flight {flight_id} has {flight.stage}; nothing to force",
                           code=ErrorCode.FLIGHT_FINAL)
        open_ids = core.store.open_gate_ids(list(flight.gates))
        held = [g for g in (core.store.gate(i) for i in flight.gates if i in open_ids)
                if g is not None and g.clearer in PERSON_CLEARERS]
        if not held:
            raise Conflict(f"flight {flight_id} waits behind no gate a person may clear",
                           code=ErrorCode.NOTHING_TO_FORCE)
        for gate in held:  # all or nothing: separation of duties holds under force too
            refusal = refusal_to_clear(gate, person=person, flight_opener=flight.opened_by)
            if refusal:
                raise Forbidden(refusal)
        released = 0
        for gate in held:
            again = core.store.gate(gate.id)
            assert again is not None, "gates are never deleted"
            released += clear_allowed(core, again, person.name)[1]
        cleared = [g.id for g in held]
        core.event(EventKind.FLIGHT_FORCED, actor=person.name, flight_id=flight_id, at=now,
                   gates=cleared)
    _signal(core, flight_id, released)
    return _flight(core, flight_id), cleared


def withdraw(core: Core, flight: Flight, actor: str) -> None:
    """A flight that ends before its approval: the open approval gate is closed
    ``superseded`` (inside the caller's transaction), so it stops showing as pending."""
    for gate in core.store.flight_gates(flight.id, kind=approvals.KIND):
        core.store.update_gate(gate.id, status="superseded", cleared_at=core.now(),
                               cleared_by=actor)


def _signal(core: Core, flight_id: str, released: int) -> None:
    if released:
        core.signals.ready_changed()
    core.signals.flight_changed(flight_id)


# -- environments that require an approval ---------------------------------------------------


def set_environment_approval(core: Core, person: Person, name: str, required: bool) -> bool:
    """Require (or stop requiring) an approval for every new flight in ``name`` (admin);
    True when that changed. Flights opened before keep what they were opened with."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        if core.store.environment(name) is None:
            raise NotFound(f"no environment {name}: gg environment chart {name} "
                           "--means PREDICATE")
        changed = core.store.set_environment_approval(name, required, at=now,
                                                      by=person.name)
        if changed:
            core.event(EventKind.ENVIRONMENT_APPROVAL, actor=person.name, at=now,
                       environment=name, approval="required" if required else "none")
    return changed
