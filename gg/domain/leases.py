"""The lease and fencing rules (SPEC section 6), as pure functions of the flight and `now`.

A lease is the pair (runner, epoch) on a flight plus an ``expires_at`` that only the
control plane sets. The epoch grows by one at every grant, so a report carrying an older
epoch comes from a machine that lost the flight and is refused (``lease_superseded``).

Expiry is a comparison of the clock with ``expires_at``, never a timer having fired: a
lease past its expiry is expired even if nothing noticed, and a renewal after expiry is
refused. Whoever looks first (a claim, a check-in, a listing) records the expiry.
"""

from __future__ import annotations

from gg.domain.flights import Flight, Grant, Stage, after_expiry, next_lease
from gg.error_codes import ErrorCode
from gg.errors import Conflict, LeaseSuperseded, NotFound

__all__ = ["Grant", "after_expiry", "check_holder", "grant", "lease_expired", "lease_live",
           "renewal_expiry", "restart_floor", "stop_margin"]


def lease_live(flight: Flight, now: float) -> bool:
    return (
        flight.stage == Stage.FLYING.value
        and flight.lease_expires_at is not None
        and now < flight.lease_expires_at
    )


def lease_expired(flight: Flight, now: float) -> bool:
    """Flying with a lease whose expiry has passed, noticed or not."""
    return (
        flight.stage == Stage.FLYING.value
        and flight.lease_expires_at is not None
        and now >= flight.lease_expires_at
    )


def grant(flight: Flight, runner_id: str, now: float, ttl: float) -> Grant:
    """The next lease on a ready flight (the store performs it as a compare-and-set)."""
    if flight.stage != Stage.READY.value:
        raise Conflict(f"flight {flight.id} is {flight.stage}, not ready")
    return next_lease(flight, runner_id, now, ttl)


def check_holder(
    flight: Flight | None, runner_id: str, epoch: int, now: float, held_epochs: set[int]
) -> Flight:
    """The flight, if ``runner_id`` holds it at ``epoch`` now; else the refusal.

    ``held_epochs`` are the epochs at which this runner was granted the flight. A runner
    that never held it gets 404 exactly like a flight that does not exist; one that held it
    at an older epoch, or whose lease ran out, gets 409 ``lease_superseded``; one whose
    flight was cancelled or has ended gets 409 ``flight_ended``.
    """
    if flight is None or epoch not in held_epochs:
        raise NotFound("no such flight")
    if flight.final and flight.epoch == epoch:
        raise Conflict(f"flight {flight.id} has ended ({flight.stage})",
                       code=ErrorCode.FLIGHT_ENDED)
    if epoch != flight.epoch or flight.lease_runner != runner_id:
        raise LeaseSuperseded()
    if not lease_live(flight, now):
        raise LeaseSuperseded("this lease has expired: the flight may be offered to another runner")
    return flight


def fact_time(now: float, ago: float | None, granted_at: float | None) -> float:
    """When a reported fact happened: ``ago`` seconds (the runner's own clock) before it
    arrived at ``now``, never before its epoch's grant nor after it arrived. A `started` that
    rode with the first output or the hand-back keeps the time the flight started."""
    if not ago:
        return now
    return max(now - ago, min(granted_at if granted_at is not None else now, now))


def renewal_expiry(now: float, ttl: float) -> float:
    return now + ttl


def restart_floor(expires_at: float, now: float, ttl: float) -> float:
    """After a control-plane restart every live lease is honoured for at least one TTL."""
    return max(expires_at, now + ttl)


def stop_margin(margin: float, renew_at: float) -> float:
    """How long before a lease's local expiry a runner that could not renew it stops its
    flight: LEASE_MARGIN, at most half of LEASE_RENEW_AT (docs/lease-protocol.md)."""
    return min(margin, renew_at / 2)

