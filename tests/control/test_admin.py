"""Admin states, retire/forget, policy and health, liveness: use cases on a real store with a
fake clock (no server), so every rule is pinned without waiting."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gg.control import admin, flights, leases, people, plan, runners, views
from gg.control.core import Core
from gg.control.people import bootstrap
from gg.control.wiring import wired
from gg.domain.flight_spec import FlightSpec
from gg.errors import BadRequest, Conflict, Forbidden, NotFound
from gg.settings import Settings
from gg.store import open_store

from fleet_support import CONFINED
from support import check_in, new_key, proof

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores

SANDBOX_OK = {"bwrap": "/usr/bin/bwrap", "bwrap_usable": True, "netns": True,
              "confinement": CONFINED}


@pytest.fixture
def settings():
    return Settings(lease_ttl=60, offline_after=45, dev=True)


@pytest.fixture
def prod(tmp_path, clock, settings):
    """A second control plane that does not run --dev."""
    data = tmp_path / "prod"
    data.mkdir()
    c = Core(store=open_store(data), settings=replace(settings, dev=False), clock=clock, wiring=wired())
    bootstrap(c, data)
    return c


def owner_of(core):
    return core.store.person_by_name("owner")


def make_runner(core, name="r1", *, labels=None, workers=1, caps=SANDBOX_OK, key=None):
    runner, credential = runners.register(core, owner_of(core), name=name,
                                          **proof(core, "register", key),
                                          labels=labels or {}, workers=workers, inventory={},
                                          version=None)
    check_in(core, runner, capabilities=caps, workers=workers)
    return core.store.runner(runner.id), credential


def kinds(core, kind, runner_id=None):
    return core.store.events(kind=kind, runner_id=runner_id)


# -- admin states ------------------------------------------------------------------------


def test_cordon_records_one_event_with_its_actor_and_repeating_it_records_none(core):
    r, _ = make_runner(core)
    change = admin.change_state(core, owner_of(core), "r1", "cordon")
    assert (change["from"], change["state"], change["changed"]) == ("active", "cordoned", True)
    again = admin.change_state(core, owner_of(core), "r1", "cordon")
    assert again["changed"] is False and again["message"] == "r1 is already cordoned"
    events = kinds(core, "info:runner:drain_changed", r.id)
    assert len(events) == 1
    assert events[0]["actor"] == "owner" and events[0]["body"]["from"] == "active"
    assert events[0]["body"]["state"] == "cordoned" and events[0]["at"] == core.now()


def test_a_cordoned_runner_is_offered_nothing_and_resume_makes_it_eligible_at_once(core):
    r, _ = make_runner(core)
    admin.change_state(core, owner_of(core), "r1", "cordon")
    f = flights.open_flight(core, owner_of(core), FlightSpec(command=["true"]))
    assert leases.try_claim(core, r.id) is None
    shown = flights.show_flight(core, f.id)
    assert shown["waiting"] == "waiting: every runner is cordoned"
    woken = []
    core.signals.on_ready.append(lambda: woken.append(1))
    admin.change_state(core, owner_of(core), "r1", "resume")
    assert woken, "resume must wake parked claims"
    assert leases.try_claim(core, r.id)[0].id == f.id


def _fly(core, runner):
    opened = flights.open_flight(core, owner_of(core), FlightSpec(command=["true"]))
    got = leases.try_claim(core, runner.id)
    assert got is not None and got[0].id == opened.id
    return got[0], got[1]


@pytest.mark.parametrize("ending", ["landed", "failed", "returned", "cancelled", "expired"])
def test_draining_becomes_drained_by_itself_on_every_path_that_ends_its_last_lease(core, clock, ending):
    r, _ = make_runner(core)
    flight, grant = _fly(core, r)
    assert admin.change_state(core, owner_of(core), "r1", "drain")["state"] == "draining"
    runner = core.store.runner(r.id)
    if ending == "cancelled":
        flights.cancel(core, owner_of(core), flight.id)
    elif ending == "expired":
        clock.advance(61)
        flights.list_flights(core)  # whoever looks first records the expiry
    else:
        leases.hand_back(core, runner, flight.id, epoch=grant.epoch, outcome=ending, exit_code=0, reason=None, key=None)
    assert core.store.runner(r.id).admin_state == "drained"
    last = kinds(core, "info:runner:drain_changed", r.id)[-1]
    assert last["actor"] == "control-plane"
    assert (last["body"]["from"], last["body"]["state"]) == ("draining", "drained")


def test_drain_without_work_is_drained_at_once_and_a_drained_runner_takes_nothing(core):
    r, _ = make_runner(core)
    assert admin.change_state(core, owner_of(core), "r1", "drain")["state"] == "drained"
    flights.open_flight(core, owner_of(core), FlightSpec(command=["true"]))
    assert leases.try_claim(core, r.id) is None


def test_drain_by_label_drains_every_runner_advertising_it_and_only_those(core):
    a, _ = make_runner(core, "a", labels={"environment": "ui"})
    b, _ = make_runner(core, "b", labels={"environment": "ui", "gpu": "a100"})
    c, _ = make_runner(core, "c", labels={"environment": "api"})
    changes = admin.drain_labelled(core, owner_of(core), {"environment": "ui"})
    assert sorted(ch["name"] for ch in changes) == ["a", "b"]
    assert core.store.runner(c.id).admin_state == "active"
    with pytest.raises(NotFound, match="no runner advertises environment=db"):
        admin.drain_labelled(core, owner_of(core), {"environment": "db"})
    with pytest.raises(BadRequest, match="label key"):
        admin.drain_labelled(core, owner_of(core), {"Bad Key": "x"})


def test_admin_commands_are_refused_to_members_and_unknown_runners_are_named(core):
    make_runner(core)
    member, _ = people.add_person(core, owner_of(core), "mia", admin=False)
    for call in (lambda: admin.change_state(core, member, "r1", "cordon"),
                 lambda: admin.retire(core, member, "r1"),
                 lambda: admin.forget(core, member, "r1"),
                 lambda: admin.set_policy(core, member, "r1", egress="none")):
        with pytest.raises(Forbidden):
            call()
    with pytest.raises(NotFound, match="no runner ghost"):
        admin.change_state(core, owner_of(core), "ghost", "cordon")


# -- retire and forget ---------------------------------------------------------------------


def test_retire_kills_the_credential_tombstones_the_key_keeps_history_and_keeps_its_flight(core):
    key = new_key()
    r, credential = make_runner(core, key=key)
    flight, grant = _fly(core, r)
    _, stopping = admin.retire(core, owner_of(core), "r1")
    assert stopping == [flight.id]
    with pytest.raises(Forbidden) as refused:
        runners.authenticate(core, credential)
    assert refused.value.code == "runner_retired"
    with pytest.raises(Forbidden, match="can never register again"):
        runners.register(core, owner_of(core), name="r1", **proof(core, "register", key),
                         labels={}, workers=1, inventory={}, version=None)
    assert [v["name"] for v in views.runners_view(core)] == []
    assert core.store.runner(r.id).admin_state == "retired"  # history kept
    # The retired host may still be running it: it stays flying on its lease.
    held = core.store.flight(flight.id)
    assert (held.stage, held.lease_runner, held.epoch) == ("flying", r.id, grant.epoch)
    assert held.lease_expires_at == grant.expires_at
    notes = [f for f in core.store.facts(flight.id) if f["kind"] == "note"]
    assert notes and "retired by owner" in notes[0]["body"]["text"]
    assert not [f for f in core.store.facts(flight.id) if f["kind"] == "returned"]
    event = kinds(core, "info:runner:retired", r.id)
    assert len(event) == 1 and event[0]["actor"] == "owner"
    assert event[0]["body"]["stopping"] == [flight.id]
    assert admin.runner_for_history(core, r.id) == r.id
    with pytest.raises(NotFound):
        admin.change_state(core, owner_of(core), "r1", "resume")


def test_a_retired_runner_may_hand_back_the_flight_it_holds_and_nothing_else(core):
    r, credential = make_runner(core)
    other, _ = make_runner(core, "r2")
    admin.change_state(core, owner_of(core), "r2", "cordon")  # r1 takes both flights
    first, grant = _fly(core, r)
    admin.retire(core, owner_of(core), "r1")
    # Every other request by the retired credential: 403 runner_retired.
    with pytest.raises(Forbidden) as refused:
        runners.authenticate(core, credential)
    assert refused.value.code == "runner_retired"
    retired = runners.authenticate(core, credential, retired_may_hand_back=True)
    for outcome in ("landed", "failed"):  # it may acknowledge the stop, not land the flight
        with pytest.raises(Forbidden) as refused:
            leases.hand_back(core, retired, first.id, epoch=grant.epoch,
                             outcome=outcome, exit_code=0, reason=None, key=None)
        assert refused.value.code == "runner_retired"
    with pytest.raises(Forbidden) as refused:  # a lease it does not hold
        leases.hand_back(core, retired, first.id, epoch=grant.epoch + 1,
                         outcome="returned", exit_code=None, reason=None, key=None)
    assert refused.value.code == "runner_retired"
    assert core.store.flight(first.id).stage == "flying"
    stopped, key = "the runner was retired: it stopped the flight", f"{grant.epoch}:hand-back"
    done = leases.hand_back(core, retired, first.id, epoch=grant.epoch,
                            outcome="returned", exit_code=None, reason=stopped, key=key)
    assert done["stage"] == "ready"
    again = leases.hand_back(core, retired, first.id, epoch=grant.epoch,
                             outcome="returned", exit_code=None, reason=stopped, key=key)
    assert again["repeat"] is True  # a lost answer retried is harmless
    with pytest.raises(Forbidden):  # once handed back, the flight is not its to return again
        leases.hand_back(core, retired, first.id, epoch=grant.epoch,
                         outcome="returned", exit_code=None, reason=None, key="other")
    admin.change_state(core, owner_of(core), "r2", "resume")
    assert leases.try_claim(core, other.id)[0].id == first.id


def test_a_retired_runners_flight_becomes_ready_when_its_lease_expires_by_the_clock(core, clock):
    r, _ = make_runner(core)
    flight, grant = _fly(core, r)
    admin.retire(core, owner_of(core), "r1")
    clock.advance(grant.expires_at - clock.now - 0.001)
    assert flights.show_flight(core, flight.id)["stage"] == "flying"
    clock.advance(0.001)
    shown = flights.show_flight(core, flight.id)
    assert shown["stage"] == "ready"
    assert [f["kind"] for f in shown["facts"]][-1] == "expired"


def test_show_says_a_retired_runner_is_stopping_the_flight(core):
    r, _ = make_runner(core)
    flight, _ = _fly(core, r)
    assert flights.show_flight(core, flight.id).get("stopping") is None
    admin.retire(core, owner_of(core), "r1")
    shown = flights.show_flight(core, flight.id)
    assert shown["runner_name"] == "r1"
    assert shown["stopping"].startswith("runner r1 was retired and is stopping it")
    assert plan.plan_for(core, flight.id)["state"] == shown["stopping"]


def test_forget_is_refused_while_online_or_leasing_naming_why_then_deletes_without_tombstone(core, clock):
    key = new_key()
    r, _ = make_runner(core, key=key)
    with pytest.raises(Conflict, match="r1 is online"):
        admin.forget(core, owner_of(core), "r1")
    flight, grant = _fly(core, r)
    runners.goodbye(core, core.store.runner(r.id))
    with pytest.raises(Conflict, match=f"holds a lease on flight {flight.id}"):
        admin.forget(core, owner_of(core), "r1")
    leases.hand_back(core, core.store.runner(r.id), flight.id, epoch=grant.epoch,
                     outcome="landed", exit_code=0, reason=None, key=None)
    admin.forget(core, owner_of(core), "r1")
    assert core.store.runner(r.id) is None
    forgotten = kinds(core, "info:runner:forgotten", r.id)
    assert len(forgotten) == 1 and forgotten[0]["actor"] == "owner"
    assert admin.runner_for_history(core, r.id) == r.id  # its events remain readable
    again, _ = runners.register(core, owner_of(core), name="r1", **proof(core, "register", key),
                                labels={}, workers=1, inventory={}, version=None)
    assert again.id != r.id  # no tombstone: the machine may come back


# -- policy and health ---------------------------------------------------------------------


def test_isolation_none_is_refused_on_a_server_without_dev(prod):
    make_runner(prod)
    with pytest.raises(BadRequest, match="only on a control plane started with --dev"):
        admin.set_policy(prod, owner_of(prod), "r1", isolation="none")


def test_a_non_dev_runner_is_sandboxed_by_default_and_healthy_once_its_report_meets_it(prod):
    r, _ = make_runner(prod, caps=None)
    assert r.policy["isolation"] == "sandbox"
    assert r.health == "degraded: no capability report yet"
    answer = check_in(prod, r, capabilities=None)
    assert "send_capabilities" in answer["directives"]
    check_in(prod, r, capabilities=SANDBOX_OK)
    assert prod.store.runner(r.id).health == "ok"
    # Neither the wait for a first report nor its arrival is news in the audit feed.
    assert kinds(prod, "warn:runner:degraded", r.id) == []
    assert kinds(prod, "info:runner:recovered", r.id) == []


def test_allowlist_degrades_the_runner_once_and_a_policy_it_can_meet_clears_it(core, clock):
    r, _ = make_runner(core)
    flights.open_flight(core, owner_of(core), FlightSpec(command=["true"]))
    clock.advance(1)
    admin.set_policy(core, owner_of(core), "r1", egress="allowlist")
    runner = core.store.runner(r.id)
    assert runner.health == "degraded: egress allowlist needs nftables (nft) and root"
    assert views.runner_view(core, runner)["checks_verdict"] == "checks pending"
    check_in(core, r)
    check_in(core, r)
    view = views.runner_view(core, core.store.runner(r.id))
    assert view["checks_verdict"] == "1 check failed"
    failed = [c for c in view["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["egress allowlist"]
    assert leases.try_claim(core, r.id) is None  # a degraded runner gets no work
    degraded = kinds(core, "warn:runner:degraded", r.id)
    assert len(degraded) == 1 and degraded[0]["body"]["missing"] == "egress allowlist needs nftables (nft) and root"
    admin.set_policy(core, owner_of(core), "r1", egress="none")
    check_in(core, r)
    assert core.store.runner(r.id).health == "ok"
    assert len(kinds(core, "info:runner:recovered", r.id)) == 1
    assert leases.try_claim(core, r.id) is not None


def test_a_host_that_cannot_sandbox_reads_degraded_with_the_missing_piece(prod):
    r, _ = make_runner(prod, caps={"bwrap": None, "bwrap_usable": False, "netns": False})
    assert prod.store.runner(r.id).health == "degraded: bubblewrap not installed"


def test_lowering_workers_applies_at_once_and_raising_past_the_start_needs_a_restart(core):
    r, _ = make_runner(core, workers=4)
    admin.set_policy(core, owner_of(core), "r1", workers=2)
    runner = core.store.runner(r.id)
    assert runner.workers == 2 and runner.policy["workers"] == 2
    admin.set_policy(core, owner_of(core), "r1", workers=8)
    view = views.runner_view(core, core.store.runner(r.id))
    assert view["health"] == "ok" and view["workers"] == 4
    assert view["health_notes"] == ["workers raised to 8 needs a restart (started with 4)"]
    check_in(core, r, workers=8)  # the runner restarted with 8
    view = views.runner_view(core, core.store.runner(r.id))
    assert view["workers"] == 8 and view["health_notes"] == []


def test_the_checks_verdict_reads_never_run_passed_and_stale(core, clock):
    r, _ = make_runner(core, caps=None)
    assert views.runner_view(core, core.store.runner(r.id))["checks_verdict"] == "checks never run"
    check_in(core, r, capabilities=SANDBOX_OK)
    assert views.runner_view(core, core.store.runner(r.id))["checks_verdict"] == "checks passed"
    clock.advance(46)
    assert views.runner_view(core, core.store.runner(r.id))["checks_verdict"] == "checks stale"


# -- liveness and version skew -------------------------------------------------------------


def test_a_silent_runner_ages_out_once_per_offline_episode(core, clock):
    r, _ = make_runner(core)
    clock.advance(46)
    assert runners.notice_silence(core) == 1
    clock.advance(5)
    assert runners.notice_silence(core) == 0
    assert len(kinds(core, "warn:runner:aged_out", r.id)) == 1
    check_in(core, r)  # back: a new episode may begin
    clock.advance(46)
    runners.notice_silence(core)
    assert len(kinds(core, "warn:runner:aged_out", r.id)) == 2


def test_looking_for_silent_runners_writes_only_when_one_is_due(core, clock):
    """The liveness watch asks every few seconds and every runner listing asks too: with
    nothing to record it is a read, and no write transaction (which on PostgreSQL would wait
    for every replica's write lock on the caller's thread, the event loop)."""
    r, _ = make_runner(core)
    said: list[str] = []
    core.store.db.trace(said.append)
    try:
        clock.advance(10)
        assert runners.notice_silence(core) == 0
        assert not [s for s in said if s.lstrip().upper().startswith(("BEGIN", "UPDATE", "INSERT"))]
        clock.advance(36)
        assert runners.notice_silence(core) == 1
        assert [s for s in said if s.lstrip().upper().startswith("BEGIN")]
    finally:
        core.store.db.trace(None)
    assert len(kinds(core, "warn:runner:aged_out", r.id)) == 1


def test_a_goodbye_is_not_an_age_out(core, clock):
    r, _ = make_runner(core)
    runners.goodbye(core, core.store.runner(r.id))
    clock.advance(100)
    assert runners.notice_silence(core) == 0
    assert len(kinds(core, "info:runner:goodbye", r.id)) == 1


def test_version_skew_is_none_skewed_or_unknown_with_one_event_per_version_pair(core):
    core.commit = "a" * 40
    same = {"gg_commit": core.commit}
    r, _ = make_runner(core)  # checked in without a version: unknown, warned once
    assert core.store.runner(r.id).version_skew == "unknown"
    check_in(core, r, version=core.version, inventory=same)
    assert core.store.runner(r.id).version_skew == "none"
    for _ in range(3):
        check_in(core, r, version="0.0.1", inventory=same)
    check_in(core, r, version="0.0.2", inventory=same)
    assert core.store.runner(r.id).version_skew == "skewed"
    check_in(core, r, version=core.version, inventory={"gg_commit": "b" * 40})
    assert core.store.runner(r.id).version_skew == "skewed"  # same version, another commit
    for _ in range(2):
        check_in(core, r, version=core.version, inventory={"gg_commit": "unknown"})
    assert core.store.runner(r.id).version_skew == "unknown"
    check_in(core, r, version="0.0.1", inventory=same)  # a pair seen before: no second event
    events = kinds(core, "warn:runner:version_skew", r.id)
    assert [(e["body"]["runner_version"], e["body"]["runner_commit"], e["body"]["skew"])
            for e in events] == [
        (None, None, "unknown"), ("0.0.1", "a" * 40, "skewed"), ("0.0.2", "a" * 40, "skewed"),
        (core.version, "b" * 40, "skewed"), (core.version, "unknown", "unknown")]

def test_a_page_where_no_flight_waits_names_its_runners_without_reading_the_fleet(core):
    """A page of flights flying and landed reads only the names of the runners it shows: the
    fleet (every runner, for the waiting reasons and estimates) is read when a row waits."""
    fleet = [make_runner(core, f"r{i}")[0] for i in range(3)]
    flight, _ = _fly(core, fleet[0])
    seen: list[str] = []
    core.store.db.trace(seen.append)
    listed = flights.list_flights(core)["items"]
    core.store.db.trace(None)
    assert [(f["id"], f["runner_name"]) for f in listed] == [(flight.id, "r0")]
    assert not [sql for sql in seen if sql.startswith("SELECT * FROM runners")]
    waiting = flights.open_flight(core, owner_of(core), FlightSpec(command=["true"]))
    seen.clear()
    core.store.db.trace(seen.append)
    listed = flights.list_flights(core)["items"]
    core.store.db.trace(None)
    assert listed[0]["id"] == waiting.id and listed[0]["waiting"]  # explained: the fleet read
    assert [sql for sql in seen if sql.startswith("SELECT * FROM runners")]


def test_a_retired_runner_keeps_its_name_in_the_flights_it_flew(core):
    r, _ = make_runner(core)
    flight, grant = _fly(core, r)
    leases.hand_back(core, r, flight.id, epoch=grant.epoch, outcome="landed", exit_code=0,
                     reason=None, key=None)
    admin.retire(core, owner_of(core), "r1")  # as a removed pool member is retired
    listed = {f["id"]: f for f in flights.list_flights(core)["items"]}
    assert listed[flight.id]["runner_name"] == "r1"
    shown = flights.show_flight(core, flight.id, estimate=False)
    assert shown["runner_name"] == "r1" and shown["attempts"][0]["runner_name"] == "r1"
