"""Attended flights: refused when the runner is flying, failed when not taken in time."""

from __future__ import annotations

import asyncio

import pytest

from gg.control import flights, leases
from gg.domain.flight_spec import FlightSpec
from gg.errors import BadRequest, Conflict

from placement_support import runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


def test_an_attended_flight_needs_a_runner(core, owner):
    with pytest.raises(BadRequest) as err:
        flights.open_flight(core, owner, FlightSpec(command=["true"], attended=True))
    assert err.value.message == "an attended flight needs a runner: gg fly --attended --runner R -- CMD"


def test_an_attended_flight_is_refused_at_once_when_the_runner_is_flying(core, owner):
    r = runner(core, owner, "r1", workers=2)
    busy = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1"))
    leases.try_claim(core, r.id)
    with pytest.raises(Conflict) as err:
        flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1", attended=True))
    assert err.value.message == (f"runner r1 is already flying {busy.id}; an attended flight "
                                 "needs it free now")
    assert len(core.store.flights()) == 1


def test_an_attended_flight_not_taken_within_claim_wait_fails_when_anyone_looks(core, owner, clock):
    runner(core, owner, "r1")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1", attended=True))
    clock.advance(29)
    assert flights.show_flight(core, f.id)["stage"] == "ready"
    clock.advance(1)  # CLAIM_WAIT has passed; nothing ran a timer, the listing looks
    row = flights.list_flights(core)["items"][0]
    assert (row["stage"], row["outcome"], row["ended_reason"]) == ("failed", "failed",
                                                                  "not taken promptly")
    note = core.store.facts(f.id)[-1]
    assert note["kind"] == "note" and note["runner_id"] is None
    assert note["body"]["text"] == ("not taken promptly: runner r1 did not take this attended "
                                    "flight within 30s")
    assert [e["kind"] for e in core.store.events(flight_id=f.id)] == [
        "info:flight:opened", "info:flight:failed"]


def test_a_claim_after_the_deadline_records_the_failure_instead_of_taking_it(core, owner, clock):
    r = runner(core, owner, "r1")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1", attended=True))
    clock.advance(31)
    assert leases.try_claim(core, r.id) is None
    assert core.store.flight(f.id).stage == "failed"


def test_an_attended_flight_taken_in_time_is_not_failed_later(core, owner, clock):
    r = runner(core, owner, "r1")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1", attended=True))
    clock.advance(5)
    assert leases.try_claim(core, r.id)[0].id == f.id
    leases.hand_back(core, r, f.id, epoch=1, outcome="returned", exit_code=None, reason="stopping", key="k")
    clock.advance(60)
    assert flights.show_flight(core, f.id)["stage"] == "ready"


def test_a_dispatch_pass_after_the_deadline_records_the_failure_and_one_before_it_does_not(
        core, owner, clock):
    """A parked claimer's pass reads when leases and attended flights fall due in one
    statement and looks for overdue attended flights only when one is: before the deadline
    the flight waits, after it the pass records the failure and offers the rest."""
    r1, r2 = runner(core, owner, "r1"), runner(core, owner, "r2")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r1", attended=True))
    other = flights.open_flight(core, owner, FlightSpec(command=["true"], runner="r2"))
    clock.advance(29)
    assert asyncio.run(core.run(lambda c: leases.match_parked(c, [r2.id])))[0][0].id == other.id
    assert core.store.flight(f.id).stage == "ready"
    clock.advance(1)  # CLAIM_WAIT has passed: the next pass, for whichever runner, records it
    assert asyncio.run(core.run(lambda c: leases.match_parked(c, [r2.id]))) == []
    assert core.store.flight(f.id).stage == "failed"
    assert core.store.flight(f.id).ended_reason == "not taken promptly"
    assert r1.id not in {g["runner_id"] for g in core.store.grants(f.id)}  # never offered it
