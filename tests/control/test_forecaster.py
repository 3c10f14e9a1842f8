"""The forecaster: big queues played in a process of its own give the very answers the server
would have worked out itself (gg.control.forecaster)."""

from __future__ import annotations

import os
import signal
from dataclasses import replace

import pytest

from gg.control import estimates, flights, groups, leases
from gg.control.core import Core
from gg.control.wiring import wired
from gg.domain.flight_spec import FlightSpec
from gg.settings import Settings
from gg.store import Store

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")
FIELDS = ("expected_start_at", "expected_start_low", "expected_start_high",
          "expected_start_basis", "expected_start")


@pytest.fixture
def settings():
    # every queue goes to the forecaster; every read plays it afresh
    return Settings(lease_ttl=600, dev=True, forecast_away=1, estimate_reuse=0)


def _here(core) -> Core:
    """A second core on the same store that plays every forecast itself, as before, with
    the same memory of turnarounds (what the server remembers, not what the store holds)."""
    here = Core(store=core.store, settings=replace(core.settings, forecast_away=0),
                clock=core.clock, wiring=wired())
    here.estimates.turnaround = core.estimates.turnaround
    return here


def _fly(core, runner, seconds, clock):
    check_in(core, runner)
    flight, grant = leases.try_claim(core, runner.id)
    clock.advance(seconds)
    leases.hand_back(core, runner, flight.id, epoch=grant.epoch, outcome="landed", exit_code=0,
                     reason=None, key=None)


def _queue(core, owner, clock, shape: str) -> None:
    """A few queues: runners of two systems with measured builds, one flying, flights
    waiting for each, for a runner nobody has, sent to one runner, and placed in a group."""
    a = make_runner(core, owner, "a", labels={"os": "linux"})
    b = make_runner(core, owner, "b", labels={"os": "mac"}, workers=2)
    for runner, env in ((a, "linux"), (b, "mac")):
        for seconds in (20, 40):
            flights.open_flight(core, owner, FlightSpec(command=["build"], labels={"os": env}))
            _fly(core, runner, seconds, clock)
    flights.open_flight(core, owner, FlightSpec(command=["build"], labels={"os": "linux"}))
    check_in(core, a)
    leases.try_claim(core, a.id)  # a flies one: the queue waits on it
    if shape == "groups":
        groups.set_group(core, owner, "lab")
    for i in range(12):
        env = ("linux", "mac", "gpu")[i % 3]
        spec = FlightSpec(command=["build"], labels={"os": env},
                          priority="high" if shape == "priorities" and i % 4 == 0 else "normal",
                          runner=b.id if shape == "targets" and i % 5 == 0 else None,
                          group="lab" if shape == "groups" and i % 4 == 1 else None)
        flights.open_flight(core, owner, spec)
        clock.advance(1)
    check_in(core, b)


@pytest.mark.parametrize("shape", ["plain", "priorities", "targets", "groups"])
def test_the_forecaster_process_answers_a_listing_as_the_server_playing_it_itself(
        core, owner, clock, shape):
    _queue(core, owner, clock, shape)
    here = _here(core)
    try:
        for limit in (200, 5):  # the whole queue, and its newest page only
            away = flights.list_flights(core, limit=limit)["items"]
            forecaster = core.estimates.forecaster
            assert forecaster is not None and forecaster.pid is not None  # it answered
            played = flights.list_flights(here, limit=limit)["items"]
            assert [r["id"] for r in away] == [r["id"] for r in played]
            assert [[r[f] for f in FIELDS] for r in away] == [
                [r[f] for f in FIELDS] for r in played]
            assert any(r["expected_start_at"] is not None for r in away)
        assert estimates.longest_waits(core) == estimates.longest_waits(here)
        assert forecaster.started == 1  # one process served every read
    finally:
        if core.estimates.forecaster is not None:
            core.estimates.forecaster.close()


def test_a_forecaster_that_died_is_replaced_and_meanwhile_the_server_plays_it_itself(
        core, owner, clock):
    _queue(core, owner, clock, "plain")
    try:
        first = flights.list_flights(core)["items"]
        forecaster = core.estimates.forecaster
        assert forecaster is not None and forecaster.pid is not None
        os.kill(forecaster.pid, signal.SIGKILL)
        again = flights.list_flights(core)["items"]  # played here: the process is gone
        assert forecaster.pid is None
        assert [[r[f] for f in FIELDS] for r in again] == [[r[f] for f in FIELDS] for r in first]
        flights.list_flights(core)
        assert forecaster.started == 2 and forecaster.pid is not None
    finally:
        if core.estimates.forecaster is not None:
            core.estimates.forecaster.close()


def test_a_memory_only_store_never_starts_a_forecaster(clock):
    memory = Core(store=Store(":memory:"), settings=Settings(forecast_away=1), clock=clock)
    try:
        assert estimates._forecaster(memory) is None
    finally:
        memory.store.close()
