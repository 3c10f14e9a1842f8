"""Lease grant, renewal, expiry and epochs as pure rules, with time passed in."""

from __future__ import annotations

import pytest

from gg.domain import leases
from gg.domain.flights import Flight, Stage
from gg.errors import Conflict, LeaseSuperseded, NotFound


def flight(**kw) -> Flight:
    base = dict(id="f_1", command=["true"], opened_by="p_1", opened_at=0.0)
    base.update(kw)
    return Flight(**base)


def flying(epoch=1, runner="r_a", expires=160.0, **kw) -> Flight:
    return flight(stage=Stage.FLYING.value, epoch=epoch, lease_runner=runner,
                  lease_expires_at=expires, **kw)


def test_a_grant_takes_the_next_epoch_and_sets_the_expiry_from_now():
    g = leases.grant(flight(epoch=3), "r_a", now=100.0, ttl=60.0)
    assert (g.epoch, g.granted_at, g.expires_at, g.runner_id) == (4, 100.0, 160.0, "r_a")


def test_only_a_ready_flight_can_be_granted():
    for stage in ("gated", "flying", "landed", "failed", "cancelled"):
        with pytest.raises(Conflict):
            leases.grant(flight(stage=stage), "r_a", now=0.0, ttl=60.0)


def test_a_lease_is_live_until_the_clock_reaches_its_expiry_and_expired_from_then_on():
    f = flying(expires=160.0)
    assert leases.lease_live(f, 159.999) and not leases.lease_expired(f, 159.999)
    assert not leases.lease_live(f, 160.0) and leases.lease_expired(f, 160.0)
    assert leases.lease_expired(f, 10_000.0)  # expired even if nothing noticed


def test_the_holder_at_the_current_epoch_may_renew_before_expiry():
    f = flying(epoch=2, expires=160.0)
    assert leases.check_holder(f, "r_a", 2, 150.0, {2}) is f
    assert leases.renewal_expiry(150.0, 60.0) == 210.0


def test_a_renewal_after_expiry_is_refused_as_superseded():
    with pytest.raises(LeaseSuperseded):
        leases.check_holder(flying(expires=160.0), "r_a", 1, 160.0, {1})


def test_a_stale_epoch_is_refused_with_lease_superseded():
    f = flying(epoch=3, runner="r_b")
    with pytest.raises(LeaseSuperseded) as err:
        leases.check_holder(f, "r_a", 2, 100.0, {2})
    assert err.value.code == "lease_superseded" and err.value.status == 409


def test_a_runner_that_never_held_the_flight_is_told_it_does_not_exist():
    with pytest.raises(NotFound):
        leases.check_holder(flying(), "r_stranger", 1, 100.0, set())
    with pytest.raises(NotFound):
        leases.check_holder(None, "r_a", 1, 100.0, {1})


def test_reports_on_an_ended_flight_are_refused_as_flight_ended():
    f = flight(stage=Stage.CANCELLED.value, epoch=1, lease_runner="r_a", lease_expires_at=160.0)
    with pytest.raises(Conflict) as err:
        leases.check_holder(f, "r_a", 1, 100.0, {1})
    assert err.value.code == "flight_ended"


def test_an_expiry_returns_the_flight_to_ready_until_max_expiries_then_fails_it():
    assert leases.after_expiry(flying(expiries=0), 5) == ("ready", 1, None)
    assert leases.after_expiry(flying(expiries=3), 5) == ("ready", 4, None)
    assert leases.after_expiry(flying(expiries=4), 5) == ("failed", 5, "lost 5 times")


def test_after_a_restart_every_lease_gets_at_least_one_ttl():
    assert leases.restart_floor(expires_at=105.0, now=100.0, ttl=60.0) == 160.0
    assert leases.restart_floor(expires_at=500.0, now=100.0, ttl=60.0) == 500.0
    assert leases.restart_floor(expires_at=10.0, now=100.0, ttl=60.0) == 160.0


def test_a_fact_sent_late_is_dated_ago_before_it_arrived_within_its_epoch():
    from gg.domain.leases import fact_time

    assert fact_time(100.0, None, 90.0) == 100.0
    assert fact_time(100.0, 0.0, 90.0) == 100.0
    assert fact_time(100.0, 4.0, 90.0) == 96.0
    assert fact_time(100.0, 40.0, 90.0) == 90.0  # never before the grant
    assert fact_time(100.0, 4.0, None) == 100.0
    assert fact_time(100.0, 4.0, 120.0) == 100.0  # never after it arrived
