"""Claim, renew, report, hand back, expire: the lease protocol of SPEC section 6.

Every function here runs inside one ``BEGIN IMMEDIATE`` transaction. The claim loads the
runner and the ready flights, asks :func:`gg.domain.matching.offerable` (the same rule the
waiting sentence uses) and grants with a compare-and-set on (stage, epoch).
"""

from __future__ import annotations

from typing import Iterable

from gg.control import attended as attended_ops
from gg.control import runners as runner_ops
from gg.control.core import CONTROL_PLANE, Core
from gg.domain import leases
from gg.domain.events import EventKind, flight_ended
from gg.domain.flights import Flight, Outcome, Stage
from gg.domain.matching import Seat, offerable, seat
from gg.domain.runners import AdminState, Runner, after_lease_ended
from gg.errors import BadRequest, GGError

_SCAN = 256


def expire_due(core: Core, now: float) -> int:
    """Record every lease past its expiry (clock comparison; no timer decides this), and
    every attended flight nobody took by its deadline."""
    attended_ops.fail_overdue(core, now)
    expired = core.store.expired_leases(now)
    for flight in expired:
        stage, expiries, reason = leases.after_expiry(flight, core.settings.max_expiries)
        values = dict(stage=stage, expiries=expiries, lease_expires_at=None)
        if stage == Stage.FAILED.value:
            values.update(outcome="failed", ended_at=now, ended_reason=reason)
        core.store.update_flight(flight.id, **values)
        core.store.add_fact(flight_id=flight.id, epoch=flight.epoch, runner_id=None,
                            kind="expired", at=now,
                            body={"runner": flight.lease_runner, "expired_at": flight.lease_expires_at,
                                  "expiries": expiries})
        core.event(EventKind.FLIGHT_EXPIRED, actor=CONTROL_PLANE, flight_id=flight.id,
                   runner_id=flight.lease_runner, at=now, epoch=flight.epoch, expiries=expiries)
        if stage == Stage.FAILED.value:
            core.event(EventKind.FLIGHT_FAILED, actor=CONTROL_PLANE, flight_id=flight.id, at=now,
                       reason=reason)
        _settle_runner(core, flight.lease_runner, now)
    return len(expired)


def seat_for(core: Core, runner: Runner, now: float, live: int | None = None) -> Seat:
    if live is None:
        live = core.store.live_leases(now, [runner.id]).get(runner.id, 0)
    return seat(runner, now, core.settings.offline_after, live,
                core.store.refuted_pairs(runner.id))


def try_claim(core: Core, runner_id: str, free_slots: int | None = None) -> tuple[Flight, leases.Grant] | None:
    """Grant this runner the oldest ready flight it may be offered, or None."""
    now = core.now()
    granted = None
    with core.store.atomic():
        expired = expire_due(core, now)
        runner = core.store.runner(runner_id)
        if runner is None:
            return None
        s = seat_for(core, runner, now)
        if free_slots is not None and free_slots <= 0:
            return None
        granted = _first_offerable(core, s, now, _ready(core))
    if expired:
        core.signals.ready_changed()
    if granted:
        core.signals.flight_changed(granted[0].id)
        core.signals.event_added()
    return granted


def assign(core: Core, seats: list[Seat]) -> list[tuple[Flight, leases.Grant]]:
    """One dispatch pass for parked claimers: oldest flights first, first fitting seat wins."""
    if not seats:
        return []
    now = core.now()
    out = []
    with core.store.atomic():
        expire_due(core, now)
        pending = list(seats)
        for flight in _ready(core):
            if not pending:
                break
            for s in pending:
                if offerable(flight, s):
                    grant = _grant(core, flight, s.runner, now)
                    if grant is not None:
                        out.append(grant)
                        pending.remove(s)
                    break
    for flight, _ in out:
        core.signals.flight_changed(flight.id)
    if out:
        core.signals.event_added()
    return out


def _ready(core: Core) -> Iterable[Flight]:
    """Ready flights, oldest first, read in growing batches: the first usually fits, so a
    claim against a long queue decodes a handful of rows, not ``_SCAN`` of them."""
    after, size = 0, 8
    while True:
        batch = core.store.ready_flights(limit=size, after_seq=after)
        if not batch:
            return
        for seq, flight in batch:
            after = seq
            yield flight
        size = min(size * 4, _SCAN)


def _first_offerable(core: Core, s: Seat, now: float, flights: Iterable[Flight]):
    for flight in flights:
        if offerable(flight, s):
            grant = _grant(core, flight, s.runner, now)
            if grant is not None:
                return grant
    return None


def _grant(core: Core, flight: Flight, runner: Runner, now: float):
    grant = leases.grant(flight, runner.id, now, core.settings.lease_ttl)
    if not core.store.cas_grant(flight.id, runner.id, grant.epoch, now, grant.expires_at):
        return None
    core.event(EventKind.FLIGHT_CLAIMED, actor=f"runner:{runner.name}", runner_id=runner.id,
               flight_id=flight.id, at=now, epoch=grant.epoch, attempt=flight.attempt + 1)
    return core.store.flight(flight.id), grant


def _holding(core: Core, runner: Runner, flight_id: str, epoch: int, now: float) -> Flight:
    flight = core.store.flight(flight_id)
    held = core.store.held_epochs(flight_id, runner.id) if flight else set()
    return leases.check_holder(flight, runner.id, epoch, now, held)


def renew(core: Core, runner: Runner, flight_id: str, epoch: int) -> dict:
    now = core.now()
    with core.store.atomic():
        expired = expire_due(core, now)
        _holding(core, runner, flight_id, epoch, now)
        expires = leases.renewal_expiry(now, core.settings.lease_ttl)
        core.store.renew_lease(flight_id, epoch, expires)
    if expired:
        core.signals.ready_changed()
    return {"flight": flight_id, "epoch": epoch, "expires_at": expires, "server_time": now}


def report(core: Core, runner: Runner, flight_id: str, epoch: int, facts: list[dict]) -> dict:
    now = core.now()
    stored = 0
    with core.store.atomic():
        _holding(core, runner, flight_id, epoch, now)
        for fact in facts:
            if core.store.add_fact(flight_id=flight_id, epoch=epoch, runner_id=runner.id,
                                   kind=fact["kind"], body=fact.get("body") or {}, at=now,
                                   idem_key=fact.get("key")):
                stored += 1
    if stored:
        core.signals.flight_changed(flight_id)
    return {"stored": stored, "received": len(facts)}


def hand_back(core: Core, runner: Runner, flight_id: str, epoch: int, outcome: str,
              exit_code: int | None, reason: str | None, key: str | None) -> dict:
    """The holder ends its lease: landed, failed, or returned (ready again at once).

    A retired runner may still hand back, as ``returned``, a flight whose lease it holds:
    that is its acknowledgement that it stopped the flight, and only then (or when the
    lease expires) does the flight become ready for another runner. Anything else from a
    retired runner is refused with 403 ``runner_retired``.
    """
    if outcome not in (o.value for o in Outcome):
        raise BadRequest(f"outcome must be landed, failed or returned (got {outcome!r})")
    now = core.now()
    retired = runner_ops.is_retired(runner)
    with core.store.atomic():
        flight = core.store.flight(flight_id)
        if _repeat_of_accepted(core, flight, runner, epoch, outcome, key):
            return {"flight": flight_id, "stage": flight.stage, "repeat": True}
        if retired:  # the stop acknowledgement: its own live lease, returned, nothing else
            if outcome != Outcome.RETURNED.value:
                raise runner_ops.retired_refusal()
            try:
                flight = _holding(core, runner, flight_id, epoch, now)
            except GGError:
                raise runner_ops.retired_refusal() from None
        else:
            flight = _holding(core, runner, flight_id, epoch, now)
        body = {"outcome": outcome, "exit_code": exit_code, "reason": reason}
        core.store.add_fact(flight_id=flight_id, epoch=epoch, runner_id=runner.id,
                            kind="returned" if outcome == Outcome.RETURNED.value else "exit",
                            body=body, at=now, idem_key=key)
        if outcome == Outcome.RETURNED.value:
            core.store.update_flight(flight_id, stage=Stage.READY.value, lease_expires_at=None)
            core.event(EventKind.FLIGHT_RETURNED, actor=f"runner:{runner.name}",
                       runner_id=runner.id, flight_id=flight_id, at=now, reason=reason)
        else:
            core.store.update_flight(flight_id, stage=outcome, outcome=outcome,
                                     exit_code=exit_code, ended_at=now, ended_reason=reason,
                                     lease_expires_at=None)
            core.event(flight_ended(outcome), actor=f"runner:{runner.name}",
                       runner_id=runner.id, flight_id=flight_id, at=now, exit_code=exit_code)
        _settle_runner(core, runner.id, now)
        stage = core.store.flight(flight_id).stage
    if outcome == Outcome.RETURNED.value:
        core.signals.ready_changed()
    core.signals.flight_changed(flight_id)
    core.signals.event_added()
    return {"flight": flight_id, "stage": stage, "repeat": False}


def _repeat_of_accepted(core: Core, flight: Flight | None, runner: Runner, epoch: int,
                        outcome: str, key: str | None) -> bool:
    """An identical repeat of an accepted hand-back is harmless (a lost answer retried)."""
    if flight is None or runner.id not in (flight.lease_runner,):
        return False
    if key is not None:
        stored = core.store.fact_with_key(flight.id, key)
        if stored is not None and stored["epoch"] == epoch:
            return True
    if not flight.final or flight.epoch != epoch:
        return False
    if flight.lease_runner != runner.id or flight.outcome != outcome:
        return False
    return True


def _settle_runner(core: Core, runner_id: str | None, now: float) -> None:
    """Draining becomes drained by itself when its last lease ends.

    Every path that ends a lease calls this in the same transaction: hand-back (landed,
    failed, returned), expiry, and cancelling a flying flight (``control.flights.cancel``).
    """
    if runner_id is None:
        return
    runner = core.store.runner(runner_id)
    if runner is None or runner.admin_state != AdminState.DRAINING.value:
        return
    live = core.store.live_leases(now, [runner_id]).get(runner_id, 0)
    state = after_lease_ended(runner, live)
    if state != runner.admin_state:
        core.store.update_runner(runner_id, admin_state=state)
        core.event(EventKind.RUNNER_DRAIN_CHANGED, actor=CONTROL_PLANE, runner_id=runner_id, at=now,
                   state=state, **{"from": runner.admin_state})


def honour_after_restart(core: Core) -> int:
    """Every flying lease gets at least one LEASE_TTL from now (no mass expiry)."""
    with core.store.atomic():
        return core.store.honour_leases_after_restart(core.now(), core.settings.lease_ttl)
