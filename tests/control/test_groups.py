"""Groups and the fleet-wide stop as use cases on a real store with a hand-moved clock."""

from __future__ import annotations

import pytest

from gg.control import flights, groups, leases
from gg.domain.flight_spec import FlightSpec
from gg.errors import Conflict, Forbidden
from gg.store import open_store

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


def test_only_an_admin_changes_groups_attributes_membership_or_the_fleet_stop(core, ada):
    for call in (lambda: groups.set_group(core, ada, "dc1"),
                 lambda: groups.set_attribute(core, ada, "site", []),
                 lambda: groups.move_runner(core, ada, "r1", "default"),
                 lambda: groups.set_group_drain(core, ada, "default", True),
                 lambda: groups.quiesce(core, ada),
                 lambda: groups.resume(core, ada)):
        with pytest.raises(Forbidden):
            call()


def test_narrowing_an_attributes_values_is_refused_while_a_group_uses_another(core, owner):
    groups.set_attribute(core, owner, "site", [])
    groups.set_group(core, owner, "dc1", attributes={"site": "dc1"})
    with pytest.raises(Conflict, match="group dc1 has site=dc1"):
        groups.set_attribute(core, owner, "site", ["dc2"])
    assert groups.set_attribute(core, owner, "site", ["dc1", "dc2"])["values"] == ["dc1", "dc2"]


def test_a_quiesced_fleet_grants_nothing_and_stays_quiesced_across_a_restart(core, owner,
                                                                              tmp_path, store_url):
    runner = make_runner(core, owner)
    check_in(core, runner)
    flights.open_flight(core, owner, FlightSpec(command=["true"]))
    groups.quiesce(core, owner)
    assert leases.try_claim(core, runner.id) is None
    reopened = open_store(tmp_path, store_url)
    assert reopened.fleet_stop()["quiesced_by"] == "owner"
    reopened.close()
    groups.resume(core, owner)
    assert leases.try_claim(core, runner.id) is not None


def test_fleet_drained_is_recorded_once_when_the_last_flight_of_a_quiesce_ends(core, owner):
    runner = make_runner(core, owner)
    check_in(core, runner)
    flight = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    _, grant = leases.try_claim(core, runner.id)
    groups.quiesce(core, owner)
    assert core.store.events(kind="warn:fleet:drained") == []
    leases.hand_back(core, core.store.runner(runner.id), flight.id, epoch=grant.epoch,
                     outcome="landed", exit_code=0, reason=None, key=None)
    groups.quiesce(core, owner)  # again: nothing new
    drained = core.store.events(kind="warn:fleet:drained")
    assert [e["body"]["quiesced_by"] for e in drained] == ["owner"]
