"""Placement by size through the use cases, on both stores: the claim and a dispatch pass
read a runner's room (its size less the limits of what it flies) and the waiting sentence
reads the same."""

from __future__ import annotations

from gg.control import flights, leases
from gg.domain.flight_spec import FlightSpec

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")  # the room is read with a join: each test runs on both

G = 1024 ** 3


def test_a_claim_offers_only_what_fits_the_room_left_and_the_next_once_it_frees(core, owner):
    r = make_runner(core, owner, "r1", workers=3)
    check_in(core, r, inventory={"cpu_count": 2, "memory_total": 4 * G})
    big = flights.open_flight(core, owner, FlightSpec(command=["true"], limits={"cpus": 2}))
    small = flights.open_flight(core, owner, FlightSpec(command=["true"], limits={"cpus": 1}))
    free = flights.open_flight(core, owner, FlightSpec(command=["true"]))  # size 0: always fits
    got = leases.try_claim(core, r.id)
    assert got is not None and got[0].id == big.id
    second = leases.try_claim(core, r.id)
    assert second is not None and second[0].id == free.id  # small is passed over, not free
    assert leases.try_claim(core, r.id) is None
    assert leases.match_parked(core, [r.id]) == []
    shown = flights.show_flight(core, small.id, estimate=False)
    assert shown["waiting"] == "waiting: no runner has 1 core free (most: 0 on r1)"
    leases.hand_back(core, r, big.id, epoch=got[1].epoch, outcome="landed", exit_code=0,
                     reason=None, key="k1")
    third = leases.try_claim(core, r.id)
    assert third is not None and third[0].id == small.id


def test_the_policy_default_fills_the_room_of_a_flight_that_asked_none(core, owner):
    r = make_runner(core, owner, "r1", workers=3)
    check_in(core, r, inventory={"cpu_count": 2, "memory_total": 4 * G})
    core.store.update_runner(r.id, policy={**core.store.runner(r.id).policy, "memory": 3 * G})
    one = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    two = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    got = leases.try_claim(core, r.id)
    assert got is not None and got[0].id == one.id
    assert leases.try_claim(core, r.id) is None  # 3G of 4G flies: 1G left, it wants 3G
    shown = flights.show_flight(core, two.id, estimate=False)
    assert shown["waiting"] == "waiting: no runner has 3G of memory free (most: 1G on r1)"
