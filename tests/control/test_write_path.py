"""The write path: use cases run by the store's writer thread, committed in groups.

Units queued together share one transaction and one commit; a unit that raises rolls back
only its own writes; nobody hears a result before the commit that holds it returned; and the
signals a unit raises reach the event loop only after that commit.
"""

from __future__ import annotations

import asyncio
import sqlite3

import psycopg
import pytest

from gg.control import flights
from gg.control.core import Core
from gg.domain.flight_spec import FlightSpec

STORES = ("sqlite", "postgresql")


def _committed(core: Core, sql: str) -> list[tuple]:
    """What another connection sees: only committed rows."""
    if core.store.dialect == "postgresql":
        with psycopg.connect(core.store.db.url) as pg:
            return pg.execute(sql).fetchall()
    conn = sqlite3.connect(core.store.db.path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _committed_flights(core: Core) -> set[str]:
    return {row[0] for row in _committed(core, "SELECT id FROM flights")}


def test_units_queued_together_commit_as_one_group_and_a_failing_one_alone_rolls_back(core, owner):
    db = core.store.db
    before = db.turns.commits
    with core.store.atomic():  # hold the write lock: the writer must queue what arrives
        futures = [db.submit(lambda i=i: flights.open_flight(core, owner, FlightSpec(command=[f"echo {i}"])))
                   for i in range(20)]

        def fails():
            flights.open_flight(core, owner, FlightSpec(command=["echo doomed"]))
            raise RuntimeError("this unit fails after writing")

        doomed = db.submit(fails)
        futures += [db.submit(lambda: flights.open_flight(core, owner, FlightSpec(command=["echo last"])))]
        assert not any(f.done() for f in futures)  # nothing answered before its commit
    opened = [f.result(timeout=30) for f in futures]
    with pytest.raises(RuntimeError, match="fails after writing"):
        doomed.result(timeout=30)
    assert db.turns.commits - before <= 2  # 22 units, at most two commits (one fsync each)
    stored = _committed_flights(core)
    assert {f.id for f in opened} <= stored
    commands = [row[0] for row in _committed(core, "SELECT command FROM flights")]
    assert not any("doomed" in c for c in commands)  # its savepoint rolled back, only it


def test_a_result_is_answered_only_once_its_commit_is_visible_to_everyone(core, owner):
    seen = []

    async def main():
        flight = await core.run(flights.open_flight, owner, FlightSpec(command=["true"]))
        seen.append(flight.id in _committed_flights(core))

    asyncio.run(main())
    assert seen == [True]


def test_signals_of_a_unit_reach_the_loop_after_its_commit(core, owner):
    heard: list[tuple[str, bool]] = []

    def on_flight(flight_id: str) -> None:
        heard.append((flight_id, flight_id in _committed_flights(core)))

    core.signals.on_flight.append(on_flight)

    async def main():
        flight = await core.run(flights.open_flight, owner, FlightSpec(command=["true"]))
        await core.run(flights.cancel, owner, flight.id)
        await asyncio.sleep(0)  # let the loop run the signal it was handed
        return flight.id

    flight_id = asyncio.run(main())
    assert heard == [(flight_id, True)]


def test_an_old_style_use_case_still_runs_on_its_own_transaction_off_the_writer(core, owner):
    flight = flights.open_flight(core, owner, FlightSpec(command=["true"]))  # no writer: atomic() as before
    assert flight.id in _committed_flights(core)
    assert core.store.flight(flight.id).stage == "ready"


def _deferred_parent_and_child(core: Core) -> None:
    """Two tables whose foreign key is checked only at COMMIT: a child without its parent is
    written, then refused by the commit itself."""
    core.store.db.run("CREATE TABLE parents (id INTEGER PRIMARY KEY)")
    core.store.db.run("CREATE TABLE children (parent INTEGER REFERENCES parents (id) "
                      "DEFERRABLE INITIALLY DEFERRED)")


REFUSED = (sqlite3.IntegrityError, psycopg.IntegrityError)


def test_a_commit_refused_outside_a_group_ends_its_transaction_and_the_next_one_commits(core):
    _deferred_parent_and_child(core)
    with pytest.raises(REFUSED):
        with core.store.atomic():
            core.store.db.run("INSERT INTO children (parent) VALUES (7)")
    with core.store.atomic():
        core.store.db.run("INSERT INTO parents (id) VALUES (1)")
    assert _committed(core, "SELECT id FROM parents") == [(1,)]
    assert _committed(core, "SELECT parent FROM children") == []


def test_a_group_whose_commit_is_refused_fails_each_unit_and_the_next_group_commits(core):
    _deferred_parent_and_child(core)
    orphan = core.store.db.submit(lambda: core.store.db.run(
        "INSERT INTO children (parent) VALUES (7)"))
    with pytest.raises(REFUSED):
        orphan.result(timeout=30)
    parent = core.store.db.submit(lambda: core.store.db.run(
        "INSERT INTO parents (id) VALUES (1)").rowcount)
    assert parent.result(timeout=30) == 1
    assert _committed(core, "SELECT id FROM parents") == [(1,)]
    assert _committed(core, "SELECT parent FROM children") == []


def test_a_units_failing_block_caught_by_the_unit_undoes_only_that_blocks_writes(core, owner):
    """A unit's first block that begins before the unit wrote anything takes no savepoint of
    its own on SQLite (the unit's stands for it): a unit that catches that block's failure
    still loses only the block's writes, keeps what it writes after, and keeps what it wrote
    before a later block that fails."""
    db = core.store.db
    with core.store.atomic():  # one group for every unit below
        kept = db.submit(lambda: flights.open_flight(core, owner, FlightSpec(command=["echo kept"])))

        def catches() -> None:
            try:
                with core.store.atomic():
                    flights.open_flight(core, owner, FlightSpec(command=["echo first-block"]))
                    raise RuntimeError("the block fails")
            except RuntimeError:
                pass
            flights.open_flight(core, owner, FlightSpec(command=["echo after"]))
            try:
                with core.store.atomic():
                    flights.open_flight(core, owner, FlightSpec(command=["echo second-block"]))
                    raise RuntimeError("this block fails too")
            except RuntimeError:
                pass

        caught = db.submit(catches)
    kept.result(timeout=30)
    caught.result(timeout=30)
    commands = sorted(row[0] for row in _committed(core, "SELECT command FROM flights"))
    assert commands == ['["echo after"]', '["echo kept"]'], commands
