"""Moving a flight along its lifecycle: the one way control changes a flight's stage.

The domain decides (:func:`gg.domain.flights.transition` turns an event into a change or
refuses it); the store applies the change as a compare-and-set on the stage and epoch this
transaction read (``Store.apply_flight_change``); then the change's fact and audit events
are recorded in the same transaction. A change decided on a stale reading is not applied
and records nothing. A change to a final stage settles the flight's dependents in the same
transaction too (gg.control.dependencies: released, or cancelled with it).
"""

from __future__ import annotations

from gg.control import dependencies, estimates
from gg.control.core import CONTROL_PLANE, Core
from gg.domain.flights import Change, Event, Flight, Stage, transition

# What the control plane offers rather than what someone asked for: a flight another
# replica's writer holds this moment is passed by (the next pass offers it again), never
# waited for (Store.apply_flight_change's ``pass_by``).
PASSED_BY = frozenset({Event.GRANTED, Event.EXPIRED})


def move(core: Core, flight: Flight, event: Event, now: float, *, actor: str | None = None,
         settle: bool = True, **details) -> Change | None:
    """Apply ``event`` to ``flight`` (as read in this transaction); the change, or None when
    the flight moved on meanwhile. Raises ``IllegalTransition`` for an event its stage has
    no edge for. ``settle=False``: its dependents are the caller's (the cascade's own
    cancels, which it walks itself rather than by recursion)."""
    change = transition(flight, event, now, actor=actor, **details)
    if not core.store.apply_flight_change(flight.id, flight.stage, flight.epoch, change,
                                          pass_by=event in PASSED_BY):
        return None
    fact = change.fact
    if fact is not None:
        core.store.add_fact(flight_id=flight.id, epoch=fact.epoch, runner_id=fact.runner_id,
                            kind=fact.kind, body=fact.body, at=now, idem_key=fact.key)
    for record in change.records:
        core.event(record.kind, actor=record.actor, runner_id=record.runner_id,
                   flight_id=flight.id, at=now, **record.body)
    estimates.on_change(core, flight, event, now, runner_id=details.get("runner_id"))
    if settle and Stage(change.to).final:
        dependencies.ended(core, flight, change, now=now, cancel=_cancel_dependent(core, now))
    return change


def _cancel_dependent(core: Core, now: float) -> dependencies.Cancel:
    """How the cascade cancels a dependent: through :func:`move`, whose own settling it
    leaves to the cascade's walk."""
    def cancel(dependent: Flight, reason: str, dependency: str) -> bool:
        return move(core, dependent, Event.CANCELLED, now, actor=CONTROL_PLANE, settle=False,
                    reason=reason, dependency=dependency) is not None
    return cancel
