"""Moving flights through the one compare-and-set, and matching as plan-then-apply, against a
real SQLite store."""

from __future__ import annotations

import pytest

from gg.control import flights, leases
from gg.control.core import Core
from gg.control.lifecycle import move
from gg.control.people import bootstrap
from gg.control.wiring import wired
from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import Event, IllegalTransition
from gg.settings import Settings
from gg.store import open_store

from support import Clock, make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def core(tmp_path, clock):
    c = Core(store=open_store(tmp_path), settings=Settings(lease_ttl=60, dev=True), clock=clock, wiring=wired())
    bootstrap(c, tmp_path)
    return c


@pytest.fixture
def owner(core):
    return core.store.person_by_name("owner")


def test_a_change_decided_on_a_stale_reading_is_not_applied_and_records_nothing(core, owner):
    a, b = make_runner(core, owner, "a"), make_runner(core, owner, "b")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    stale = core.store.flight(f.id)
    with core.store.atomic():
        first = move(core, stale, Event.GRANTED, core.now(), actor="runner:a", runner_id=a.id,
                     ttl=60)
        second = move(core, stale, Event.GRANTED, core.now(), actor="runner:b", runner_id=b.id,
                      ttl=60)
    assert first is not None and first.grant.epoch == 1 and second is None
    now = core.store.flight(f.id)
    assert (now.stage, now.lease_runner, now.epoch, now.attempt) == ("flying", a.id, 1, 1)
    assert [g["runner_id"] for g in core.store.grants(f.id)] == [a.id]
    assert len(core.store.events(kind="info:flight:claimed")) == 1


def test_an_event_the_stage_has_no_edge_for_is_refused_and_writes_nothing(core, owner):
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    with core.store.atomic(), pytest.raises(IllegalTransition):
        move(core, core.store.flight(f.id), Event.LANDED, core.now(), runner_id="r_x")
    assert core.store.flight(f.id).stage == "ready" and core.store.facts(f.id) == []


def test_the_store_refuses_a_stage_written_past_the_compare_and_set(core, owner):
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    with pytest.raises(ValueError):
        core.store.update_flight(f.id, stage="landed")
    assert core.store.flight(f.id).stage == "ready"


def test_parked_claimers_are_matched_oldest_flight_to_longest_parked_runner(core, owner):
    a, b, c = (make_runner(core, owner, n) for n in ("a", "b", "c"))
    first = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    second = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    granted = leases.match_parked(core, [b.id, a.id, c.id])
    assert [(fl.id, g.runner_id, g.epoch) for fl, g in granted] == [(first.id, b.id, 1),
                                                                     (second.id, a.id, 1)]
    assert leases.match_parked(core, [c.id]) == []  # nothing left to offer


def test_returned_and_expired_both_put_a_flight_back_through_the_same_table(core, owner, clock):
    a = make_runner(core, owner, "a")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    _, grant = leases.try_claim(core, a.id)
    leases.hand_back(core, a, f.id, epoch=grant.epoch, outcome="returned", exit_code=None, reason="no disk", key="k1")
    _, grant = leases.try_claim(core, a.id)
    clock.advance(61)
    assert leases.expire_now(core) == 1
    again = core.store.flight(f.id)
    assert (again.stage, again.epoch, again.expiries, again.lease_expires_at) == ("ready", 2, 1,
                                                                                  None)
    assert [x["kind"] for x in core.store.facts(f.id)] == ["returned", "expired"]
    kinds = [e["kind"] for e in core.store.events(flight_id=f.id)]
    assert kinds.count("info:flight:returned") == 1 and kinds.count("info:flight:expired") == 1
