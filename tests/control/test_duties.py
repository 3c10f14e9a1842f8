"""Background duties held by one replica at a time, and a replica's start that extends no
lease while another replica serves (gg.control.duties), on both stores."""

from __future__ import annotations

from gg.control import duties, flights, leases
from gg.control.core import Core
from gg.control.wiring import wired
from gg.domain.flight_spec import FlightSpec
from gg.store import open_store

from support import make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


def _another_replica(core: Core, tmp_path, store_url: str) -> Core:
    """A second server process on the same store (SQLite: the same file)."""
    return Core(store=open_store(tmp_path, store_url), settings=core.settings, clock=core.clock, wiring=wired())


def test_a_duty_is_held_by_one_replica_until_its_holder_lets_it_lapse(core, clock, tmp_path,
                                                                      store_url):
    other = _another_replica(core, tmp_path, store_url)
    try:
        assert duties.take(core) == set(duties.ALL)
        assert duties.take(other) == set()  # held: the other replica does none of them
        clock.advance(core.settings.duty_ttl / 2)
        assert duties.take(core) == set(duties.ALL)  # renewed by its holder
        clock.advance(core.settings.duty_ttl - 0.1)
        assert duties.take(other) == set()  # renewed half a TTL ago: still held
        clock.advance(0.2)  # the holder went away and its hold lapsed
        assert duties.take(other) == set(duties.ALL)
        assert duties.take(core) == set()  # the old holder finds them taken over
        duties.give_up(other)  # a replica that stops frees them at once
        assert duties.take(core) == set(duties.ALL)
    finally:
        if store_url:
            other.store.close()


def test_a_replica_starting_while_another_serves_extends_no_lease(core, owner, clock, tmp_path,
                                                                  store_url):
    runner = make_runner(core, owner, "r1")
    flight = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, runner.id)
    granted = core.store.flight(flight.id).lease_expires_at
    clock.advance(30)
    duties.take(core)  # this replica serves, and renews its duties
    starting = _another_replica(core, tmp_path, store_url)
    try:
        assert leases.honour_after_restart(starting) == 0
        assert core.store.flight(flight.id).lease_expires_at == granted
        # Nobody renewed a duty for longer than half of LEASE_RENEW_AT: the control plane
        # was away, and a start honours every lease for one LEASE_TTL as before.
        clock.advance(core.settings.lease_renew_at)
        assert leases.honour_after_restart(starting) == 1
        assert core.store.flight(flight.id).lease_expires_at == clock.now + core.settings.lease_ttl
    finally:
        if store_url:
            starting.store.close()
