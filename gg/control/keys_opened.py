"""A new flight's concurrency key and grace, kept in the opening's transaction, and the
older flights of its key it cancels with ``--cancel-in-progress`` (docs/jobs.md). Apart from
gg.control.concurrency, which the grant (gg.control.leases) reads: this one cancels, so it
needs the lease protocol's settling of a runner."""

from __future__ import annotations

from gg.control import approvals as approval_ops
from gg.control import leases as lease_ops
from gg.control.core import Core
from gg.control.lifecycle import move
from gg.domain.concurrency import superseded
from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import Event, Flight, Stage


def record(core: Core, flight: Flight, spec: FlightSpec, now: float) -> list[str]:
    """Keep a new flight's key and grace (in the opening's transaction); with
    ``--cancel-in-progress``, cancel the older flights of its key that have not ended. The
    ids of the flights cancelled."""
    if spec.grace is not None:
        core.store.set_grace(flight.id, spec.grace)
    c = spec.concurrency
    if c is None:
        return []
    older = core.store.unended_with_key(c.key) if c.cancel_in_progress else []
    core.store.set_concurrency(flight.id, c)
    cancelled = []
    for flight_id in older:
        old = core.store.flight(flight_id)
        if old is None or old.final:
            continue
        if move(core, old, Event.CANCELLED, now, actor=f"flight:{flight.id}",
                reason=superseded(flight.id, c.key)) is None:
            continue
        approval_ops.withdraw(core, old, f"flight:{flight.id}")
        if old.stage == Stage.FLYING.value:
            lease_ops._settle_runner(core, old.lease_runner, now)  # its lease ended here
        cancelled.append(flight_id)
    return cancelled
