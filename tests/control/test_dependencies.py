"""``--after``: dependencies held, released and cascaded in the transaction that ends the
dependency, on both stores (docs/work-graphs.md)."""

from __future__ import annotations

import pytest

from gg.control import flights, leases
from gg.control.core import Core
from gg.control.plan import plan_for
from gg.domain.flight_spec import FlightSpec
from gg.errors import BadRequest
from gg.store import open_store

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


def fly(core, person, clock, title="", **kw):
    clock.advance(1)
    return flights.open_flight(core, person, FlightSpec(command=["true"], title=title, **kw))


def claim(core, clock, runner):
    clock.advance(1)
    check_in(core, runner)  # the clock moved on: it is still online
    return leases.try_claim(core, runner.id)


def hand_back(core, runner, flight, grant, outcome="landed", reason=None):
    leases.hand_back(core, runner, flight.id, epoch=grant.epoch, outcome=outcome,
                     exit_code=0 if outcome == "landed" else 1, reason=reason,
                     key=f"{flight.id}:{grant.epoch}")


def stage(core, flight) -> tuple[str, str | None]:
    f = core.store.flight(flight.id)
    return f.stage, f.ended_reason


def test_a_chain_is_offered_in_order_and_a_dependent_waits_naming_its_first_dependency(
        core, owner, clock):
    runner = make_runner(core, owner, "r1", workers=4)
    build = fly(core, owner, clock, title="build")
    test = fly(core, owner, clock, title="test", after=(build.id, build.id))  # twice: once
    publish = fly(core, owner, clock, after=(test.id,))
    assert test.stage == "ready" and core.store.dependencies_of(test.id)[0].id == build.id
    shown = flights.show_flight(core, test.id, estimate=False)
    assert shown["waiting"] == f"waiting: {build.id} (build) is still waiting"
    assert [d["id"] for d in shown["after"]] == [build.id] and shown["after_any"] is False
    assert [d["id"] for d in shown["dependents"]] == [publish.id]
    plan = plan_for(core, test.id)
    assert not plan["startable"]
    item = next(i for i in plan["items"] if i["need"].startswith("dependency"))
    assert item["need"] == f"dependency {build.id} (build) has landed" and not item["held"]
    assert item["ways"][0]["who"] == f"{build.id}'s opener (owner)"

    got, grant = claim(core, clock, runner)
    assert got.id == build.id
    assert claim(core, clock, runner) is None  # test and publish are held, not offered
    shown = flights.show_flight(core, test.id, estimate=False)
    assert shown["waiting"] == f"waiting: {build.id} (build) is still flying"
    assert any(w["who"] == "runner r1, flying it"
               for w in next(i for i in plan_for(core, test.id)["items"]
                             if i["need"].startswith("dependency"))["ways"])
    hand_back(core, runner, got, grant)
    got, grant = claim(core, clock, runner)
    assert got.id == test.id
    assert claim(core, clock, runner) is None
    hand_back(core, runner, got, grant)
    got, grant = claim(core, clock, runner)
    assert got.id == publish.id
    assert flights.show_flight(core, publish.id, estimate=False)["waiting"] is None


def test_a_failure_cancels_dependents_two_levels_deep_naming_the_flight_that_failed_first(
        core, owner, clock):
    runner = make_runner(core, owner, "r1", workers=4)
    build = fly(core, owner, clock, title="build")
    test = fly(core, owner, clock, title="test", after=(build.id,))
    publish = fly(core, owner, clock, title="publish", after=(test.id,))
    report = fly(core, owner, clock, title="report", after=(test.id,), after_any=True)
    got, grant = claim(core, clock, runner)
    hand_back(core, runner, got, grant, outcome="failed", reason="exit 1")
    assert stage(core, test) == ("cancelled", f"dependency {build.id} failed")
    assert stage(core, publish) == ("cancelled", f"dependency {build.id} failed")
    cancelled = {e["flight_id"]: e["body"]
                 for e in core.store.events(kind="info:flight:cancelled")}
    assert cancelled[publish.id]["dependency"] == build.id
    assert cancelled[publish.id]["reason"] == f"dependency {build.id} failed"
    assert flights.show_flight(core, publish.id, estimate=False)["ended"] == (
        f"it was cancelled (dependency {build.id} failed)")
    # --after-any: a dependency that was cancelled still lets it run
    got, _ = claim(core, clock, runner)
    assert got.id == report.id

    # a dependency that is cancelled, or already failed when the dependent opens
    lone = fly(core, owner, clock)
    after = fly(core, owner, clock, after=(lone.id,))
    flights.cancel(core, owner, lone.id)
    assert stage(core, after) == ("cancelled", f"dependency {lone.id} was cancelled")
    with pytest.raises(BadRequest) as refused:
        fly(core, owner, clock, after=(build.id,))
    assert str(refused.value) == (f"dependency {build.id} already failed: open it with "
                                  "--after-any to run after it anyway")
    assert fly(core, owner, clock, after=(build.id, lone.id), after_any=True).stage == "ready"


def test_bad_dependencies_are_refused_in_one_sentence_and_nothing_opens(core, owner, clock):
    before = len(core.store.flights())
    for after, said in [(("f_0000000000",), "--after: no flight f_0000000000 in this organisation"),
                        (tuple(f"f_{i:010x}" for i in range(101)),
                         "--after names 101 flights; a flight may depend on at most 100")]:
        with pytest.raises(BadRequest) as refused:
            fly(core, owner, clock, after=after)
        assert str(refused.value) == said
    with pytest.raises(BadRequest) as refused:
        fly(core, owner, clock, after_any=True)
    assert str(refused.value) == "--after-any needs --after F1,F2: the flights to run after"
    assert len(core.store.flights()) == before


def test_a_dependent_waiting_across_a_restart_is_released_when_its_dependency_lands(
        core, owner, clock, tmp_path, store_url):
    runner = make_runner(core, owner, "r1", workers=2)
    build = fly(core, owner, clock)
    test = fly(core, owner, clock, after=(build.id,))
    got, grant = claim(core, clock, runner)
    core.store.close()
    again = Core(store=open_store(tmp_path, store_url), settings=core.settings, clock=clock)
    try:
        assert claim(again, clock, runner) is None  # still held after the restart
        hand_back(again, runner, got, grant)
        assert claim(again, clock, runner)[0].id == test.id
    finally:
        if not store_url:
            again.store.close()
