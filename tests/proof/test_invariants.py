"""The invariant checker: silent on an honest history, loud on each kind of broken promise.

Histories are made by the real use cases on a real SQLite store with a hand-moved clock;
each broken promise is then forged with plain SQL, the way a bug in the server would.
"""

from __future__ import annotations

import sqlite3

import pytest

from gg.control import admin, flights, leases, runners
from gg.control.core import Core
from gg.control.people import bootstrap
from gg.control.wiring import wired
from gg.domain.flight_spec import FlightSpec
from gg.proof.invariants import Restart, check
from gg.settings import Settings
from gg.store import open_store

from support import Clock, make_runner

TTL = 60.0


@pytest.fixture
def world(tmp_path):
    clock = Clock()
    core = Core(store=open_store(tmp_path), settings=Settings(dev=True, lease_ttl=TTL, max_expiries=3),
                clock=clock, wiring=wired())
    bootstrap(core, tmp_path)
    owner = core.store.person_by_name("owner")
    return core, owner, clock, tmp_path / "gg.sqlite3"


def _history(core, owner, clock):
    """Landed, failed, returned-then-landed, expired-then-landed, cancelled, ready, flying."""
    a, b = make_runner(core, owner, "a", workers=4), make_runner(core, owner, "b", workers=4)
    ids = {}
    for name in ("landed", "failed", "returned", "expired", "cancelled", "ready", "flying"):
        ids[name] = flights.open_flight(core, owner, FlightSpec(command=["true"])).id
        clock.advance(1)
    for name in ("landed", "failed", "returned", "expired"):
        got = leases.try_claim(core, a.id)
        assert got[0].id == ids[name]
    leases.report(core, a, ids["landed"], epoch=1, facts=[{"kind": "output", "body": {"text": "hi"}, "key": "1:o:1"}])
    leases.hand_back(core, a, ids["landed"], epoch=1, outcome="landed", exit_code=0, reason=None, key="1:hand-back")
    leases.hand_back(core, a, ids["failed"], epoch=1, outcome="failed", exit_code=3, reason=None, key="1:hand-back")
    leases.hand_back(core, a, ids["returned"], epoch=1,
                     outcome="returned", exit_code=None, reason="no credential", key="1:hand-back")
    flights.cancel(core, owner, ids["cancelled"])
    clock.advance(TTL + 1)  # a's lease on "expired" runs out
    for r in (a, b):
        runners.check_in(core, r, readings={}, inventory=None, capabilities=None, version=None,
                         held=[], peer_address=None)
    taken = {leases.try_claim(core, b.id)[0].id for _ in range(2)}
    assert taken == {ids["returned"], ids["expired"]}
    for name in ("returned", "expired"):
        leases.hand_back(core, b, ids[name], epoch=2, outcome="landed", exit_code=0, reason=None, key="2:hand-back")
    flights.cancel(core, owner, ids["ready"])  # keep one honestly ready below
    ids["ready"] = flights.open_flight(core, owner, FlightSpec(command=["true"])).id
    ids["flying"] = leases.try_claim(core, b.id)[0].id
    return ids


def _forge(path, sql: str, params=()) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, params)
    conn.close()


def test_an_honest_history_holds_every_invariant(world):
    core, owner, clock, path = world
    _history(core, owner, clock)
    report = check(path, lease_ttl=TTL, now=clock.now)
    assert report.ok, report.summary()
    assert report.counts["flights"] == 8 and report.counts["grants"] == 7


def test_the_checker_cannot_write_to_the_store(world):
    core, owner, clock, path = world
    from gg.proof.invariants import open_read_only

    conn = open_read_only(path)
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("DELETE FROM flights")
    conn.close()


def test_an_epoch_claimed_by_two_runners_is_caught(world):
    core, owner, clock, path = world
    ids = _history(core, owner, clock)
    other = core.store.runners()[0].id
    _forge(path, "INSERT INTO events (kind, at, runner_id, flight_id, body) VALUES "
                 "('info:flight:claimed', ?, ?, ?, '{\"epoch\": 1}')", (clock.now, other, ids["flying"]))
    report = check(path, lease_ttl=TTL, now=clock.now)
    assert report.broken("one_holder_per_epoch"), report.summary()


def test_a_fact_from_a_runner_that_never_held_the_epoch_is_caught(world):
    core, owner, clock, path = world
    ids = _history(core, owner, clock)
    a = core.store.runners_named("a")[0].id
    _forge(path, "INSERT INTO facts (flight_id, epoch, runner_id, kind, body, at) VALUES "
                 "(?, 1, ?, 'output', '{}', ?)", (ids["flying"], a, clock.now))
    assert check(path, lease_ttl=TTL, now=clock.now).broken("one_holder_per_epoch")


def test_a_gap_in_epochs_is_caught(world):
    core, owner, clock, path = world
    ids = _history(core, owner, clock)
    _forge(path, "UPDATE grants SET epoch = 3 WHERE flight_id = ? AND epoch = 2", (ids["expired"],))
    assert check(path, lease_ttl=TTL, now=clock.now).broken("epochs_increase")


def test_two_accepted_outcomes_are_caught(world):
    core, owner, clock, path = world
    ids = _history(core, owner, clock)
    b = core.store.runners_named("b")[0].id
    _forge(path, "INSERT INTO facts (flight_id, epoch, runner_id, kind, body, at) VALUES "
                 "(?, 2, ?, 'exit', '{\"outcome\": \"failed\"}', ?)", (ids["expired"], b, clock.now))
    _forge(path, "INSERT INTO events (kind, at, flight_id) VALUES ('info:flight:failed', ?, ?)",
           (clock.now, ids["landed"]))
    report = check(path, lease_ttl=TTL, now=clock.now)
    flagged = {v.flight_id for v in report.broken("one_final_outcome")}
    assert flagged == {ids["expired"], ids["landed"]}, report.summary()


def test_a_lost_flight_is_caught(world):
    core, owner, clock, path = world
    ids = _history(core, owner, clock)
    _forge(path, "DELETE FROM flights WHERE id = ?", (ids["ready"],))
    assert check(path, lease_ttl=TTL, now=clock.now).broken("nothing_lost")


def test_a_lease_run_out_unnoticed_is_caught_only_past_the_grace(world):
    core, owner, clock, path = world
    _history(core, owner, clock)
    later = clock.now + TTL + 5
    assert check(path, lease_ttl=TTL, now=later).broken("nothing_lost")
    assert not check(path, lease_ttl=TTL, now=later, stuck_grace=10).broken("nothing_lost")


def test_a_stale_report_accepted_after_the_next_grant_is_caught(world):
    core, owner, clock, path = world
    ids = _history(core, owner, clock)
    a = core.store.runners_named("a")[0].id
    # epoch 1 of "expired" belonged to a; a late output from it after epoch 2 was granted:
    _forge(path, "INSERT INTO facts (flight_id, epoch, runner_id, kind, body, at) VALUES "
                 "(?, 1, ?, 'output', '{}', ?)", (ids["expired"], a, clock.now))
    report = check(path, lease_ttl=TTL, now=clock.now)
    details = " ".join(v.detail for v in report.broken("no_stale_reports"))
    assert "after epoch 2 was granted" in details and "after that lease expired" in details


def test_an_expiry_right_after_a_restart_is_caught_and_a_later_one_is_not(world):
    core, owner, clock, path = world
    ids = _history(core, owner, clock)
    b = core.store.runners_named("b")[0]
    granted = clock.now  # "flying" was granted last, a lease of one TTL
    restart = Restart(down_at=granted + 1, up_at=granted + 2)
    # A broken restart that did not honour leases: the lease runs out on its old expiry,
    # less than one TTL after the new process started.
    clock.advance(TTL + 0.5)
    with core.store.atomic():
        assert leases.expire_due(core, clock.now) == 1
    assert check(path, lease_ttl=TTL, restarts=[restart],
                 now=clock.now).broken("no_expiry_after_restart")
    # Honoured (gg's behaviour): the expiry comes a full TTL after the restart.
    assert not check(path, lease_ttl=TTL, restarts=[Restart(restart.down_at - 2 * TTL,
                                                            restart.up_at - 2 * TTL)],
                     now=clock.now).broken("no_expiry_after_restart")
    assert ids and b


def test_a_retired_runners_flight_handed_back_then_regranted_holds_every_invariant(world):
    core, owner, clock, path = world
    a, b = make_runner(core, owner, "a"), make_runner(core, owner, "b")
    opened = [flights.open_flight(core, owner, FlightSpec(command=["true"])).id for _ in range(2)]
    assert {leases.try_claim(core, r.id)[0].id for r in (a, b)} == set(opened)
    admin.retire(core, owner, "a")
    admin.retire(core, owner, "b")
    c = make_runner(core, owner, "c", workers=2)
    assert leases.try_claim(core, c.id) is None  # still flying on the retired runners
    acked = core.store.flights_held_by(a.id)[0].id
    leases.hand_back(core, core.store.runner(a.id), acked, epoch=1,
                     outcome="returned", exit_code=None, reason="stopped", key=None)
    clock.advance(TTL)  # b never acknowledges: its lease expires by the clock
    runners.check_in(core, c, readings={}, inventory=None, capabilities=None, version=None,
                     held=[], peer_address=None)
    for _ in opened:
        flight, grant = leases.try_claim(core, c.id)
        leases.hand_back(core, c, flight.id, epoch=grant.epoch, outcome="landed", exit_code=0, reason=None, key=None)
    report = check(path, lease_ttl=TTL, now=clock.now)
    assert report.ok, report.summary()
    assert report.counts["grants"] == 4


def test_a_flight_regranted_before_its_holder_stopped_is_caught(world):
    core, owner, clock, path = world
    ids = _history(core, owner, clock)
    # Returned by fiat (no hand-back by its holder), the way retiring a runner once did:
    _forge(path, "UPDATE facts SET runner_id = NULL WHERE flight_id = ? AND kind = 'returned'",
           (ids["returned"],))
    # An expiry recorded before the lease had run out by the clock:
    _forge(path, "UPDATE facts SET at = at - ? WHERE flight_id = ? AND kind = 'expired'",
           (TTL, ids["expired"]))
    report = check(path, lease_ttl=TTL, now=clock.now)
    flagged = {v.flight_id for v in report.broken("attempts_never_overlap")}
    assert flagged == {ids["returned"], ids["expired"]}, report.summary()


def test_an_episode_recorded_twice_is_caught(world):
    """Two replicas that both noticed one expiry (or one silent runner) and both recorded it."""
    core, owner, clock, path = world
    ids = _history(core, owner, clock)
    assert check(path, lease_ttl=TTL, now=clock.now).ok
    _forge(path, "INSERT INTO events (kind, at, actor, flight_id, body) SELECT kind, at, actor, "
                 "flight_id, body FROM events WHERE kind = 'info:flight:expired' AND flight_id = ?",
           (ids["expired"],))
    runner = core.store.runners_named("a")[0].id
    for _ in range(2):
        _forge(path, "INSERT INTO events (kind, at, actor, runner_id, body) VALUES "
                     "('warn:runner:aged_out', ?, 'control-plane', ?, '{\"last_seen_at\": 5.5}')",
               (clock.now, runner))
    broken = check(path, lease_ttl=TTL, now=clock.now).broken("each_episode_once")
    assert [v.flight_id for v in broken] == [ids["expired"], None], broken
    assert "aged_out was recorded 2 times" in broken[1].detail


# -- retries: one accepted exit per attempt, the outcome is the last attempt's ----------------


def _retried_history(core, owner, clock):
    """A flight with retries that fails twice then lands, and one that failed once and waits
    for its retry (ready again)."""
    from gg.domain.retries import Retry

    a = make_runner(core, owner, "a", workers=2)
    spec = FlightSpec(command=["true"], retry=Retry(retries=3))
    landed = flights.open_flight(core, owner, spec).id
    for epoch in (1, 2):
        assert leases.try_claim(core, a.id)[0].id == landed
        answer = leases.hand_back(core, a, landed, epoch=epoch, outcome="failed", exit_code=1,
                                  reason="exit 1", key=f"{epoch}:hand-back")
        assert answer["stage"] == "ready"
        clock.advance(1)
    assert leases.try_claim(core, a.id)[0].id == landed
    leases.hand_back(core, a, landed, epoch=3, outcome="landed", exit_code=0, reason=None,
                     key="3:hand-back")
    waiting = flights.open_flight(core, owner, spec).id
    assert leases.try_claim(core, a.id)[0].id == waiting
    leases.hand_back(core, a, waiting, epoch=1, outcome="failed", exit_code=2, reason="exit 2",
                     key="1:hand-back")
    return {"landed": landed, "waiting": waiting}


def test_a_flight_failing_twice_then_landing_on_its_retries_holds_every_invariant(world):
    core, owner, clock, path = world
    ids = _retried_history(core, owner, clock)
    report = check(path, lease_ttl=TTL, now=clock.now)
    assert report.ok, report.summary()
    assert core.store.flight(ids["landed"]).stage == "landed"
    assert core.store.flight(ids["waiting"]).stage == "ready"


def test_an_exit_before_the_last_that_was_not_retried_is_caught(world):
    core, owner, clock, path = world
    ids = _retried_history(core, owner, clock)
    _forge(path, "UPDATE facts SET body = '{\"outcome\": \"failed\", \"exit_code\": 1}' "
                 "WHERE flight_id = ? AND kind = 'exit' AND epoch = 1", (ids["landed"],))
    flagged = check(path, lease_ttl=TTL, now=clock.now).broken("one_final_outcome")
    assert {v.flight_id for v in flagged} == {ids["landed"]}


def test_two_exits_of_one_attempt_are_caught(world):
    core, owner, clock, path = world
    ids = _retried_history(core, owner, clock)
    a = core.store.runners_named("a")[0].id
    _forge(path, "INSERT INTO facts (flight_id, epoch, runner_id, kind, body, at) VALUES "
                 "(?, 2, ?, 'exit', '{\"outcome\": \"failed\", \"retry\": \"retry 2 of 3\"}', ?)",
           (ids["landed"], a, clock.now))
    flagged = check(path, lease_ttl=TTL, now=clock.now).broken("one_final_outcome")
    assert ids["landed"] in {v.flight_id for v in flagged}


def test_a_waiting_retry_whose_exit_was_final_is_caught(world):
    core, owner, clock, path = world
    ids = _retried_history(core, owner, clock)
    _forge(path, "UPDATE facts SET body = '{\"outcome\": \"failed\"}' "
                 "WHERE flight_id = ? AND kind = 'exit'", (ids["waiting"],))
    flagged = check(path, lease_ttl=TTL, now=clock.now).broken("one_final_outcome")
    assert {v.flight_id for v in flagged} == {ids["waiting"]}


def test_a_retry_granted_before_the_failed_attempt_ended_is_caught(world):
    core, owner, clock, path = world
    ids = _retried_history(core, owner, clock)
    _forge(path, "DELETE FROM facts WHERE flight_id = ? AND kind = 'exit' AND epoch = 1",
           (ids["landed"],))
    flagged = check(path, lease_ttl=TTL, now=clock.now).broken("attempts_never_overlap")
    assert {v.flight_id for v in flagged} == {ids["landed"]}
