"""Estimates against a real store: what the claim path keeps, and how it is read back."""

from __future__ import annotations

import re

import pytest

from gg.control import estimates, flights, leases
from gg.control.core import Core
from gg.control.wiring import wired
from gg.domain.estimates import GATED, kind_of
from gg.domain.flight_spec import FlightSpec
from gg.settings import Settings
from gg.store import open_store
from gg.store.estimates import FLIGHT

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")  # storage: history folded in the final report's transaction


@pytest.fixture
def settings():
    return Settings(lease_ttl=600, dev=True)


def _fly(core, runner, seconds, clock, outcome="landed"):
    check_in(core, runner)
    flight, grant = leases.try_claim(core, runner.id)
    clock.advance(seconds)
    leases.hand_back(core, runner, flight.id, epoch=grant.epoch, outcome=outcome,
                     exit_code=0 if outcome == "landed" else 1, reason=None, key=None)
    return flight


def _one_waits_behind_one_flying(core, owner, clock, *, history: int):
    """Runner ``a`` after ``history`` 30-second builds, flying one more, with one waiting."""
    a = make_runner(core, owner, "a")
    for _ in range(history):
        flights.open_flight(core, owner, FlightSpec(command=["build"]))
        _fly(core, a, 30, clock)
    flying = flights.open_flight(core, owner, FlightSpec(command=["build"]))
    check_in(core, a)
    leases.try_claim(core, a.id)
    return a, flying, flights.open_flight(core, owner, FlightSpec(command=["build"]))


def test_a_final_report_folds_the_duration_into_its_kinds_summary_and_a_return_does_not(
        core, owner, clock):
    a = make_runner(core, owner, "a")
    f = flights.open_flight(core, owner, FlightSpec(command=["make", "test"], title="tests"))
    _fly(core, a, 30, clock)
    flights.open_flight(core, owner, FlightSpec(command=["make", "test"], title="tests"))
    _fly(core, a, 5, clock, outcome="returned")
    kept = core.store.durations(FLIGHT)
    assert list(kept) == [kind_of(f)]
    assert kept[kind_of(f)].count == pytest.approx(1.0)
    assert abs(kept[kind_of(f)].remaining(0.0)[0] - 30) < 2


def test_the_estimate_shown_is_kept_at_the_grant_and_checked_by_accuracy(core, owner, clock):
    a, flying, waiting = _one_waits_behind_one_flying(core, owner, clock, history=3)
    shown = flights.show_flight(core, waiting.id)
    assert abs(shown["expected_start_at"] - (clock.now + 30)) < 3
    assert shown["expected_start_low"] <= shown["expected_start_at"] <= shown["expected_start_high"]
    assert re.fullmatch(r"expected to start in ~3[01] s \(0 flights ahead on 1 runner\)",
                        shown["expected_start"])
    row = next(r for r in flights.list_flights(core)["items"] if r["id"] == waiting.id)
    assert row["expected_start_at"] == shown["expected_start_at"]
    assert next(r for r in flights.list_flights(core)["items"] if r["id"] == flying.id)[
        "expected_start_basis"] is None
    assert estimates.accuracy(core, None)["starts"] == 0
    clock.advance(32)
    check_in(core, a)
    leases.hand_back(core, a, flying.id, epoch=1, outcome="landed", exit_code=0, reason=None,
                     key=None)
    assert leases.try_claim(core, a.id)[0].id == waiting.id
    report = estimates.accuracy(core, None)
    assert report["starts"] == 1 and report["inside"] == 1
    assert 0 < report["median_error"] < 3 and report["median_wait"] == pytest.approx(32)
    assert estimates.accuracy(core, clock.now + 1)["starts"] == 0


def test_the_estimate_shown_by_one_server_is_kept_by_the_grant_of_another_or_after_a_restart(
        core, owner, clock, tmp_path, store_url):
    """Shown estimates live in the store: a replica (or the same server started again) that
    grants the flight finds what its person was shown, and showing it again unchanged writes
    nothing new."""
    a, flying, waiting = _one_waits_behind_one_flying(core, owner, clock, history=2)
    shown = flights.show_flight(core, waiting.id)
    first_shown_at = clock.now
    clock.advance(2)
    assert flights.show_flight(core, waiting.id)["expected_start_at"] == pytest.approx(
        shown["expected_start_at"], abs=0.5)  # the same estimate, shown again

    other = Core(store=open_store(tmp_path, store_url), settings=core.settings, clock=clock, wiring=wired())
    try:
        assert other.estimates.written == {}  # nothing in this one's memory
        clock.advance(28)
        check_in(other, a)
        leases.hand_back(other, a, flying.id, epoch=1, outcome="landed", exit_code=0,
                         reason=None, key=None)
        assert leases.try_claim(other, a.id)[0].id == waiting.id
        report = estimates.accuracy(other, None)
        assert report["starts"] == 1 and report["inside"] == 1
        assert report["median_wait"] == pytest.approx(clock.now - first_shown_at)
        assert estimates.accuracy(core, None)["starts"] == 1  # one store: both servers see it
    finally:
        if store_url:
            other.store.close()


def test_a_flight_shown_an_estimate_waits_again_and_its_next_start_keeps_the_new_one(
        core, owner, clock):
    a, flying, waiting = _one_waits_behind_one_flying(core, owner, clock, history=1)
    flights.show_flight(core, waiting.id)
    clock.advance(30)
    check_in(core, a)
    leases.hand_back(core, a, flying.id, epoch=1, outcome="landed", exit_code=0, reason=None,
                     key=None)
    flight, grant = leases.try_claim(core, a.id)
    assert flight.id == waiting.id
    # handed back as returned: it waits again, behind a new flight that flies first
    blocker = flights.open_flight(core, owner, FlightSpec(command=["build"], priority="high"))
    leases.hand_back(core, a, waiting.id, epoch=grant.epoch, outcome="returned", exit_code=None,
                     reason="machine going away", key=None)
    check_in(core, a)
    assert leases.try_claim(core, a.id)[0].id == blocker.id
    again = flights.show_flight(core, waiting.id)
    assert again["expected_start_at"] is not None
    shown_again_at = clock.now
    clock.advance(30)
    check_in(core, a)
    leases.hand_back(core, a, blocker.id, epoch=1, outcome="landed", exit_code=0, reason=None,
                     key=None)
    assert leases.try_claim(core, a.id)[0].id == waiting.id
    kept = {r["flight_id"]: r for r in core.store.start_estimates(0)}
    assert kept[waiting.id]["estimated_at"] == pytest.approx(shown_again_at)
    assert kept[waiting.id]["at"] == pytest.approx(again["expected_start_at"])


def test_a_page_of_new_estimates_is_written_in_one_statement_and_an_unmoved_one_not_again(
        core, owner, clock):
    a = make_runner(core, owner, "a")
    flights.open_flight(core, owner, FlightSpec(command=["build"]))
    _fly(core, a, 30, clock)
    check_in(core, a)
    waiting = [flights.open_flight(core, owner, FlightSpec(command=["build"])).id for _ in range(5)]
    said: list[str] = []
    core.store.db.trace(said.append)
    try:
        rows = flights.list_flights(core)["items"]
        clock.advance(0.5)
        flights.list_flights(core)  # the same estimates, half a second on: nothing to write
    finally:
        core.store.db.trace(None)
    assert sum(r["expected_start_at"] is not None for r in rows) == 5
    assert sum("INSERT INTO shown_estimates" in s for s in said) == 1
    kept = dict(core.store.db.tuples("SELECT flight_id, at FROM shown_estimates"))
    assert sorted(kept) == sorted(waiting)


def test_a_flight_with_no_runner_or_behind_a_gate_gets_the_reason_not_a_time(core, owner):
    make_runner(core, owner, "a")
    nobody = flights.open_flight(core, owner, FlightSpec(command=["x"], labels={"gpu": "yes"}))
    row = flights.show_flight(core, nobody.id)
    assert (row["expected_start_at"], row["expected_start_low"], row["expected_start_high"]) == (
        None, None, None)
    assert row["expected_start_basis"].startswith("no estimate") and row["expected_start"] is None
    assert estimates.fields(None, 0.0)["expected_start_basis"] is None
    gated = estimates.fields(estimates.estimates.no_estimate(GATED), 0.0)
    assert gated["expected_start_basis"] == GATED and gated["expected_start_at"] is None


def test_a_flight_placed_in_a_group_without_runners_gets_no_time(core, owner, clock):
    from gg.control import groups
    from gg.domain.estimates import NOBODY

    a = make_runner(core, owner, "a")  # in group default, and its kind of flight is measured
    flights.open_flight(core, owner, FlightSpec(command=["build"]))
    _fly(core, a, 30, clock)
    groups.set_group(core, owner, "lab")  # nobody is in it
    placed = flights.open_flight(core, owner, FlightSpec(command=["build"], group="lab"))
    free = flights.open_flight(core, owner, FlightSpec(command=["build"]))
    check_in(core, a)
    in_lab, anywhere = (flights.show_flight(core, f.id) for f in (placed, free))
    assert in_lab["expected_start_at"] is None
    assert in_lab["expected_start_basis"] == NOBODY
    assert anywhere["expected_start_at"] is not None  # runner a takes it


def test_the_pages_of_one_listing_share_one_forecast_until_an_event_or_the_reuse_window(
        core, owner, clock):
    a = make_runner(core, owner, "a")
    check_in(core, a)
    for _ in range(3):
        flights.open_flight(core, owner, FlightSpec(command=["build"]))
    first = flights.list_flights(core, limit=1)
    kept = core.estimates.last_forecast
    second = flights.list_flights(core, limit=1, cursor=first["next_cursor"])
    assert core.estimates.last_forecast is kept  # the second page reused the first page's run
    assert second["items"][0]["expected_start_basis"] is not None
    flights.open_flight(core, owner, FlightSpec(command=["build"]))  # an event: the queue changed
    flights.list_flights(core, limit=1)
    assert core.estimates.last_forecast is not kept
    kept = core.estimates.last_forecast
    clock.advance(core.settings.estimate_reuse)  # the window passed: looked at afresh
    flights.list_flights(core, limit=1)
    assert core.estimates.last_forecast is not kept


def test_a_read_plays_the_queue_only_as_far_as_its_flights_and_a_read_already_covered_reuses_it(
        core, owner, clock):
    a = make_runner(core, owner, "a")
    check_in(core, a)
    opened = [flights.open_flight(core, owner, FlightSpec(command=["build"])) for _ in range(5)]
    first = flights.show_flight(core, opened[0].id)
    assert core.estimates.last_forecast[2].played == [opened[0].id]  # nothing behind it was played
    assert first["expected_start_basis"] is not None
    page = flights.list_flights(core, limit=2)  # the newest two: the last in the queue
    assert core.estimates.last_forecast[2].played == [f.id for f in opened]
    kept = core.estimates.last_forecast
    again = flights.show_flight(core, opened[0].id)  # covered by the listing's run: reused
    assert core.estimates.last_forecast is kept
    assert again["expected_start_at"] == first["expected_start_at"]
    assert [r["expected_start_basis"] for r in page["items"]] == [
        kept[2].get(f.id).basis for f in opened[:2:-1]]
