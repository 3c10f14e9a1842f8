"""Attended flights: refused when the runner is busy, failed when not taken in time.

The failure is recorded by whoever looks first after the deadline, inside the same kind of
transaction as lease expiry (``leases.expire_due`` calls :func:`fail_overdue`); the server's
wake-up (``gg.server.deadlines``) only makes sure somebody looks promptly.
"""

from __future__ import annotations

from gg.control.core import CONTROL_PLANE, Core
from gg.control.lifecycle import move
from gg.domain import attended
from gg.domain.flights import Event
from gg.error_codes import ErrorCode
from gg.errors import BadRequest, Conflict


def check_open(core: Core, runner_target: str | None) -> None:
    """Refuse an attended flight at once when its runner is already flying (or not named)."""
    now = core.now()
    if runner_target is None:
        needs_runner = attended.refusal_to_open(None, None, [])
        assert needs_runner is not None, "a flight that names no runner is always refused"
        raise BadRequest(needs_runner, code=ErrorCode.ATTENDED_NEEDS_RUNNER)
    runner = core.store.runner(runner_target)
    flying = [f.id for f in core.store.flights_held_by(runner_target)
              if f.lease_expires_at is not None and f.lease_expires_at > now]
    refusal = attended.refusal_to_open(runner_target, runner.name if runner else runner_target,
                                       flying)
    if refusal is not None:
        raise Conflict(refusal, code=ErrorCode.RUNNER_BUSY)


def next_deadline(core: Core) -> float | None:
    first = core.store.first_untaken_attended()
    return None if first is None else attended.due_at(first, core.settings.claim_wait)


def overdue_since(core: Core, now: float, first: float | None) -> bool:
    """Whether an attended flight nobody took is past its deadline, from when the oldest of
    them was opened (None: there is none), read already (``Store.next_looks``)."""
    return first is not None and now >= attended.due_at(first, core.settings.claim_wait)


def fail_overdue(core: Core, now: float) -> list[str]:
    """Fail every attended flight past its deadline (inside the caller's transaction)."""
    wait = core.settings.claim_wait
    failed = []
    for flight_id in core.store.untaken_attended(now - wait):
        flight = core.store.flight(flight_id)
        if flight is None or not attended.overdue(flight, now, wait):
            continue
        target = core.store.runner(flight.runner_target) if flight.runner_target else None
        name = target.name if target else flight.runner_target
        if move(core, flight, Event.NOT_TAKEN, now, actor=CONTROL_PLANE, runner_name=name,
                claim_wait=wait) is not None:
            failed.append(flight_id)
    for flight_id in failed:
        core.signals.flight_changed(flight_id)
    return failed
