"""``gg rerun F [--with KEY=VALUE ...]``: a new flight from F's spec (docs/jobs.md).

The spec is F's as it holds it (:meth:`gg.domain.flight_spec.FlightSpec.to_wire`, what
opens the same flight again), with the settings kept in tables of their own added back
(concurrency key, grace, resource limits, retries; not ``--after``: what it ran after has
ended), and the changes asked put over it. It is opened by
:func:`gg.control.flights.open_flight`, so a rerun passes every check ``gg fly`` does
(environment and its gate, approvals, priority, runner, limits); the two flights are linked
both ways in the opening's transaction (``rerun_of`` on the new one, ``reruns`` on F).
"""

from __future__ import annotations

from typing import Any

from gg.control import flights as flight_ops
from gg.control.core import Core
from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import Flight
from gg.domain.people import Person
from gg.errors import NotFound


def spec_of(core: Core, flight: Flight) -> FlightSpec:
    """The whole spec of ``flight``: its columns and its settings' own tables."""
    wire = flight.spec.to_wire()
    concurrency = core.store.concurrency_of([flight.id]).get(flight.id)
    if concurrency is not None:
        wire["concurrency"] = concurrency.to_wire()
    wire["grace"] = core.store.graces_of([flight.id]).get(flight.id)
    wire["limits"] = core.store.flight_limits(flight.id)
    state = core.store.retry_state(flight.id)
    wire["retry"] = state.retry.to_wire() if state is not None else None
    wire["after"], wire["after_any"] = [], False
    # the secrets it asked for (names: a value is opened at the rerun's own grant), its note
    wire["secrets"] = [{"name": n, "envvar": v} for n, v in core.store.flight_secrets(flight.id)]
    wire["note"] = core.store.flight_note(flight.id)
    return FlightSpec.from_wire(wire)


def rerun(core: Core, person: Person, flight_id: str, changes: dict[str, Any]) -> Flight:
    """Open a new flight from ``flight_id``'s spec with ``changes`` (fields of the open's
    body: title, environment, runner, priority, timeout, retry) put over it."""
    old = core.store.flight(flight_id)
    if old is None:
        raise NotFound(f"no flight {flight_id}")
    wire = spec_of(core, old).to_wire()
    retry = changes.pop("retry", None)
    wire.update({k: v for k, v in changes.items() if v is not None})
    if retry is not None:  # each retry setting said replaces that one only
        mine = wire.get("retry") or {}
        wire["retry"] = {**mine, **{k: v for k, v in retry.items() if v is not None}}
    if "environment" in changes and changes["environment"] is not None:
        wire["labels"] = {k: v for k, v in wire["labels"].items() if k != "environment"}
    return flight_ops.open_flight(core, person, FlightSpec.from_wire(wire), rerun_of=old.id)
