"""Maintenance of enrolled machines (SPEC 10): one flight per machine, one gate per missing item.

Every MAINTENANCE_CHECK_INTERVAL an enrolled runner checks what its profile in force needs
(its agent present, every credential the profile names in its store, every repository host
reachable) and reports each item on its next check-in. Here::

    item missing, no gate for it      -> open a gate (kind maintenance, clearer machine,
                                         runner_id set) and hold the machine's maintenance
                                         flight behind it (the flight is opened if none is)
    item confirmed, its gate open     -> the machine clears the gate (gates.clear_gate with
                                         runner_id): no person can, the gate model refuses
    item no longer needed (profile    -> its gate is superseded
      changed), its gate open
    the flight's last gate gone       -> the maintenance flight lands

The items are the ones the control plane expects from the profile in force; anything else a
runner reports is ignored, so a machine can only ever gate its own maintenance flight on what
its profile really needs. Item names: ``agent:NAME``, ``credential:SLUG-OR-NAME``,
``host:HOST[:PORT]``.
"""

from __future__ import annotations

from gg.control import gates
from gg.control.core import CONTROL_PLANE, Core
from gg.control.lifecycle import move
from gg.domain import tokens
from gg.domain.enrolment import expected_items, refs_digest
from gg.domain.events import EventKind
from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import Event, Flight, opened
from gg.domain.gates import Gate
from gg.domain.profiles import Profile
from gg.domain.runners import Runner

__all__ = ["confirm", "report"]

MAINTENANCE = "maintenance"


def report(core: Core, runner: Runner, items: list[dict], *,
           credentials_digest: str | None = None) -> None:
    """A maintenance report from ``runner``: open, clear and supersede its gates.

    A report checked against another credential store than the one the runner registered
    last (``credentials_digest``) is stale about credentials: those items are left alone.
    """
    if runner.kind != "enrolled":
        return
    profile = Profile.from_dict(runner.profile_in_force) if runner.profile_in_force else None
    expected = expected_items(profile)
    stale = (credentials_digest is not None
             and credentials_digest != refs_digest(runner.credential_refs or []))
    missing: dict[str, str] = {}
    confirmed: set[str] = set()
    for entry in items:
        item = str(entry.get("item", ""))
        if item not in expected or (stale and item.startswith("credential:")):
            continue
        if entry.get("ok"):
            confirmed.add(item)
        else:
            missing[item] = str(entry.get("detail") or "missing")
    _settle(core, runner, expected=expected, missing=missing, confirmed=confirmed)


def confirm(core: Core, runner: Runner, items: set[str]) -> None:
    """The machine confirmed ``items`` outside a report (e.g. ``gg credential add``)."""
    if runner.kind != "enrolled" or not items:
        return
    profile = Profile.from_dict(runner.profile_in_force) if runner.profile_in_force else None
    _settle(core, runner, expected=expected_items(profile), missing={}, confirmed=items)


def _settle(core: Core, runner: Runner, *, expected: dict[str, str], missing: dict[str, str],
            confirmed: set[str]) -> None:
    with core.store.atomic():
        open_gates = {str(g.payload.get("item")): g
                      for g in core.store.gates(status="open", runner_id=runner.id,
                                                kind=MAINTENANCE)}
        now = core.now()
        for item, gate in open_gates.items():
            if item not in expected:
                core.store.update_gate(gate.id, status="superseded", cleared_at=now,
                                       cleared_by=CONTROL_PLANE)
                land_if_done(core, gate)
            elif item in confirmed:
                gates.clear_gate(core, gate.id, runner_id=runner.id)
        new = [item for item in missing if item not in open_gates]
        if new:
            flight = core.store.open_maintenance_flight(runner.id) or _open_flight(core, runner)
            for item in new:
                gate = gates.open_gate(
                    core, kind=MAINTENANCE, subject=f"runner:{runner.id}/{item}",
                    guards=_guards(item, runner), why=f"{missing[item]}; {expected[item]}",
                    clearer="machine", actor=CONTROL_PLANE, runner_id=runner.id,
                    flight_id=flight.id, payload={"item": item})
                gates.hold_flights(core, gate.id, [flight.id])
                core.store.add_fact(flight_id=flight.id, epoch=0, runner_id=None, kind="note",
                                    at=now, body={"text": f"missing: {_guards(item, runner)}: "
                                                          f"{missing[item]}", "gate": gate.id})


def land_if_done(core: Core, gate: Gate) -> None:
    """The maintenance flight lands when none of its gates is open any more."""
    if not gate.flight_id:
        return
    flight = core.store.flight(gate.flight_id)
    if flight is None or flight.final or flight.kind != MAINTENANCE:
        return
    remaining = [g for g in flight.gates if g != gate.id]
    if core.store.open_gate_ids(remaining):
        core.store.update_flight(flight.id, gates=[g for g in remaining
                                                   if g in core.store.open_gate_ids(remaining)])
        return
    move(core, flight, Event.CONFIRMED, core.now(), actor=CONTROL_PLANE)
    core.signals.flight_changed(flight.id)


def _open_flight(core: Core, runner: Runner) -> Flight:
    now = core.now()
    spec = FlightSpec(command=(MAINTENANCE,), kind=MAINTENANCE, runner=runner.id,
                      title=f"maintenance of runner {runner.name}")
    flight = opened(spec, held=True, id=tokens.new_id("f_"), opened_by=CONTROL_PLANE,
                    opened_at=now)
    core.store.insert_flight(flight)
    core.event(EventKind.FLIGHT_OPENED, actor=CONTROL_PLANE, runner_id=runner.id,
               flight_id=flight.id, at=now, title=flight.title, flight_kind=MAINTENANCE)
    return flight


def _guards(item: str, runner: Runner) -> str:
    kind, _, what = item.partition(":")
    if kind == "agent":
        return f"agent {what} present on runner {runner.name}"
    if kind == "credential":
        return f"credential {what} held by runner {runner.name}"
    return f"repository host {what} reachable from runner {runner.name}"
