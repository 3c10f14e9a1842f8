"""Retention against a real SQLite store and a hand-moved clock: what is pruned (final and
older than its window, with everything that hangs off it), what never is (a flight that is
not final, of any age), and that every batch is bounded."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gg.control import flights, gates, leases, machine_console, retention
from gg.domain.flight_spec import FlightSpec
from gg.domain.machine_console import ConsoleSession
from gg.proof.invariants import check
from gg.settings import Settings

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores

DAY = 86400.0


@pytest.fixture
def settings() -> Settings:
    return Settings(dev=True, claim_wait=30, lease_ttl=600, offline_after=45,
                    retain_flights=10 * DAY, retain_events=30 * DAY, retention_batch=5)


def landed(core, owner, runner, outputs: int = 3):
    """A flight that ran on ``runner``, printed ``outputs`` lines and landed."""
    check_in(core, runner)  # online now, whatever the clock did
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    flight, grant = leases.try_claim(core, runner.id)
    assert flight.id == f.id
    holder = core.store.runner(runner.id)
    leases.report(core, holder, f.id, epoch=grant.epoch,
                  facts=[{"kind": "output", "body": {"text": f"line {i}"}} for i in range(outputs)])
    leases.hand_back(core, holder, f.id, epoch=grant.epoch, outcome="landed", exit_code=0,
                     reason=None, key=None)
    assert core.store.flight(f.id).stage == "landed"
    return f.id


def prune_until_done(core) -> list[retention.Pruned]:
    done = []
    for _ in range(1000):
        batch = retention.prune_batch(core)
        if not batch.full:
            return done
        done.append(batch)
    raise AssertionError("pruning never finished")


def rows_of(core, flight_id: str) -> dict[str, int]:
    return {table: core.store.db.one(f"SELECT count(*) FROM {table} WHERE flight_id = ?",
                                     (flight_id,))[0]
            for table in ("facts", "grants", "events")}


def test_a_final_flight_older_than_the_window_goes_with_its_facts_grants_and_events(
        core, owner, clock):
    runner = make_runner(core, owner, "r1")
    old = landed(core, owner, runner)
    assert all(rows_of(core, old).values())
    clock.advance(10 * DAY + 1)
    young = landed(core, owner, runner)
    prune_until_done(core)
    assert core.store.flight(old) is None
    assert rows_of(core, old) == {"facts": 0, "grants": 0, "events": 0}
    assert core.store.flight(young).stage == "landed"  # ended less than the window ago
    assert all(rows_of(core, young).values())


def test_a_flight_that_is_not_final_is_never_pruned_whatever_its_age(core, owner, clock):
    runner = make_runner(core, owner, "r1")
    flying = flights.open_flight(core, owner, FlightSpec(command=["sleep", "1"]))
    assert leases.try_claim(core, runner.id)[0].id == flying.id
    ready = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    gate = gates.open_gate(core, kind="approval", subject="flights", guards="the flights",
                           why="held", clearer="admin", actor="owner")
    held = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    gates.hold_flights(core, gate.id, [held.id])
    stages = {f: core.store.flight(f).stage for f in (flying.id, ready.id, held.id)}
    assert stages == {flying.id: "flying", ready.id: "ready", held.id: "gated"}
    core.store.db.run("UPDATE flights SET ended_at = 1")  # even with an end stamped long ago
    clock.advance(1000 * DAY)
    prune_until_done(core)
    for flight_id, stage in stages.items():
        assert core.store.flight(flight_id).stage == stage
        assert rows_of(core, flight_id)["events"] > 0  # its history stays whole


def test_events_go_by_their_own_window_and_the_checker_does_not_call_that_broken(
        core, owner, clock, tmp_path):
    core.store.db.run("DELETE FROM events")
    runner = make_runner(core, owner, "r1")
    core.settings = replace(core.settings, retain_flights=100 * DAY, retain_events=5 * DAY)
    kept_flight = landed(core, owner, runner)
    first_event = core.store.events(limit=1)[0]["seq"]
    clock.advance(6 * DAY)
    recent = landed(core, owner, runner)
    prune_until_done(core)
    seqs = [e["seq"] for e in core.store.events()]
    assert first_event not in seqs and seqs  # old events went, recent ones stayed
    assert core.store.flight(kept_flight).stage == "landed"  # the flight's window is longer
    assert rows_of(core, kept_flight)["events"] == 0 and rows_of(core, kept_flight)["facts"] > 0
    assert rows_of(core, recent)["events"] > 0
    report = check(core.store.db.path, lease_ttl=600, now=clock())
    assert report.ok, report.summary()


def _console(core, owner, runner, name: str) -> str:
    session = ConsoleSession(id=f"c_{name}", runner_id=runner.id, person_id=owner.id,
                             person_name=owner.name, opened_at=core.now())
    core.store.add_console(session)
    return session.id


def test_console_sessions_closed_past_the_events_window_go_and_open_ones_stay(core, owner, clock):
    runner = make_runner(core, owner, "r1")
    core.settings = replace(core.settings, retain_flights=100 * DAY, retain_events=5 * DAY)
    old = [_console(core, owner, runner, f"old{i}") for i in range(7)]  # more than one batch
    for console_id in old:
        machine_console.close(core, console_id, exit_code=0, reason=None)
    still_open = _console(core, owner, runner, "open")
    clock.advance(6 * DAY)
    recent = _console(core, owner, runner, "recent")
    machine_console.close(core, recent, exit_code=0, reason=None)
    batches = prune_until_done(core)
    assert sum(b.consoles for b in batches) == 7 and all(b.consoles <= 5 for b in batches)
    assert all(core.store.console(c) is None for c in old)
    assert core.store.console(still_open).closed_at is None  # open: never pruned, whatever its age
    assert core.store.console(recent) is not None  # closed inside the window


def test_every_batch_is_bounded_by_the_batch_size(core, owner, clock):
    runner = make_runner(core, owner, "r1")
    ids = [landed(core, owner, runner, outputs=12) for _ in range(4)]
    clock.advance(40 * DAY)
    before = core.store.db.one("SELECT count(*) FROM facts")[0]
    batches = prune_until_done(core)
    assert all(b.flights + b.rows <= 5 and b.events <= 5 for b in batches)
    assert len(batches) >= before // 5
    assert all(core.store.flight(f) is None for f in ids)
    assert core.store.db.one("SELECT count(*) FROM facts")[0] == 0


def test_a_window_of_zero_keeps_everything(core, owner, clock):
    core.settings = replace(core.settings, retain_flights=0.0, retain_events=0.0)
    runner = make_runner(core, owner, "r1")
    f = landed(core, owner, runner)
    clock.advance(10_000 * DAY)
    assert not retention.prune_batch(core).full
    assert core.store.flight(f).stage == "landed"


def test_every_pruning_statement_walks_an_index_in_order_never_a_whole_table(core, owner, clock):
    if core.store.dialect != "sqlite":
        pytest.skip("reads SQLite's query plans (PostgreSQL plans by its own statistics)")
    runner = make_runner(core, owner, "r1")
    for _ in range(3):
        landed(core, owner, runner)
    machine_console.close(core, _console(core, owner, runner, "closed"), exit_code=0, reason=None)
    clock.advance(40 * DAY)
    statements: list[str] = []
    core.store.db.trace(statements.append)
    try:
        prune_until_done(core)
    finally:
        core.store.db.trace(None)
    pruning = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "DELETE"))]
    assert {"FROM facts", "FROM grants", "FROM events", "FROM flights", "FROM machine_consoles"} <= {
        f"FROM {t}" for t in ("facts", "grants", "events", "flights", "machine_consoles")
        if any(f"DELETE FROM {t}" in s for s in pruning)}, statements
    for sql in pruning:
        plan = [row[3] for row in core.store.db.all("EXPLAIN QUERY PLAN " + sql)]
        # no walk of a whole table, and no sort of everything that matches before the LIMIT
        assert plan and not [step for step in plan
                             if step.startswith("SCAN") or "TEMP B-TREE" in step], (sql, plan)


def test_a_pruned_flights_dependency_concurrency_and_grace_rows_go_with_it(core, owner, clock):
    from gg.domain.concurrency import Concurrency

    runner = make_runner(core, owner)
    first = landed(core, owner, runner)
    check_in(core, runner)
    spec = FlightSpec(command=["true"], after=(first,), concurrency=Concurrency("deploy", 1),
                      grace=2.0, limits={"pids": 64}, note="for the release")
    f = flights.open_flight(core, owner, spec)
    flight, grant = leases.try_claim(core, runner.id)
    assert flight.id == f.id
    leases.hand_back(core, core.store.runner(runner.id), f.id, epoch=grant.epoch,
                     outcome="landed", exit_code=0, reason=None, key=None)
    tables = ("flight_after", "flight_dependencies", "flight_concurrency", "flight_grace",
              "flight_limits", "flight_notes")
    counts = {t: core.store.db.one(f"SELECT count(*) FROM {t} WHERE flight_id = ?", (f.id,))[0]
              for t in tables}
    assert all(counts.values()), counts
    clock.advance(11 * DAY)
    prune_until_done(core)
    assert core.store.flight(f.id) is None
    assert {t: core.store.db.one(f"SELECT count(*) FROM {t} WHERE flight_id = ?", (f.id,))[0]
            for t in tables} == dict.fromkeys(tables, 0)


def test_every_per_flight_table_is_pruned_with_its_flights(core):
    """A per-flight setting's table (``flight_<setting>``, keyed by flight id) is named once,
    in the store's list of a flight's children; one left out would keep its rows forever."""
    if core.store.db.dialect == "postgresql":
        names = [r[0] for r in core.store.db.all(
            "SELECT table_name FROM information_schema.columns WHERE column_name = 'flight_id' "
            "AND table_schema = current_schema()")]
    else:
        names = [r[0] for r in core.store.db.all(
            "SELECT m.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c "
            "WHERE m.type = 'table' AND c.name = 'flight_id'")]
    per_flight = {n for n in names if n.startswith("flight_")}
    assert per_flight and per_flight <= set(core.store.flight_children)


def test_a_pruned_flights_retries_attempts_and_rerun_rows_go_with_it(core, owner, clock):
    from gg.control import reruns
    from gg.domain.retries import Retry

    runner = make_runner(core, owner)
    check_in(core, runner)
    old = flights.open_flight(core, owner, FlightSpec(command=["true"], retry=Retry(retries=1)))
    for outcome in ("failed", "landed"):  # a retried failure, then the landing
        flight, grant = leases.try_claim(core, runner.id)
        assert flight.id == old.id
        leases.hand_back(core, core.store.runner(runner.id), old.id, epoch=grant.epoch,
                         outcome=outcome, exit_code=0 if outcome == "landed" else 1,
                         reason=None, key=None)
    new = reruns.rerun(core, owner, old.id, {})
    flight, grant = leases.try_claim(core, runner.id)
    assert flight.id == new.id
    leases.hand_back(core, core.store.runner(runner.id), new.id, epoch=grant.epoch,
                     outcome="landed", exit_code=0, reason=None, key=None)
    tables = ("flight_retries", "flight_attempts", "flight_reruns")

    def counts():
        return {t: core.store.db.one(f"SELECT count(*) FROM {t} WHERE flight_id IN (?, ?)",
                                     (old.id, new.id))[0] for t in tables}

    assert counts() == {"flight_retries": 2, "flight_attempts": 1, "flight_reruns": 1}
    clock.advance(11 * DAY)
    prune_until_done(core)
    assert core.store.flight(old.id) is None and core.store.flight(new.id) is None
    assert counts() == dict.fromkeys(tables, 0)
