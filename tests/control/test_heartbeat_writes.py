"""Heartbeats written together (gg.control.heartbeats): the claim handler's heartbeats are
noted on the event loop and written by the store's writer, many runners' by one statement;
the rows, liveness and the "back online" signal are what a heartbeat written alone gives."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gg.control import leases as lease_ops
from gg.control import runners
from gg.domain.flight_spec import FlightSpec
from gg.domain.runners import is_online, policy_digest

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")  # the one UPDATE … FROM (VALUES …) runs on both


def _beat(core, runner, i: int):
    return runners.heartbeat_coalesced(
        core, runner, readings={"cpu_percent": float(i), "memory_percent": 50.0 + i},
        free_slots=i % 3, peer_address=f"10.0.0.{i}", stated_policy=None)


async def _noted(core, runner_id: str, cpu: float) -> None:
    """Until ``runner_id``'s heartbeat with ``cpu`` is noted for the next unit, with a bound."""
    for _ in range(3000):
        if any(beat.runner_id == runner_id and beat.readings["cpu_percent"] == cpu
               for beat in core.heartbeats.pending):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the heartbeat of {runner_id} was never noted")


def _heartbeat_statements(core) -> list[str]:
    seen: list[str] = []
    lock = threading.Lock()

    def trace(sql: str) -> None:
        if "UPDATE runners SET last_seen_at" in sql:
            with lock:
                seen.append(sql)

    core.store.db.trace(trace)
    return seen


def test_many_runners_heartbeats_in_one_writer_group_are_one_statement_and_each_row_right(
        core, owner, clock):
    fleet = [make_runner(core, owner, name=f"r{i}") for i in range(40)]
    clock.advance(5)
    statements = _heartbeat_statements(core)
    gate = threading.Event()

    async def beat_all():
        held = core.store.db.submit(lambda: gate.wait(30))  # the writer is busy meanwhile
        tasks = [asyncio.create_task(_beat(core, r, i)) for i, r in enumerate(fleet)]
        for i, r in enumerate(fleet):  # every heartbeat is noted while the writer is busy
            await _noted(core, r.id, float(i))
        assert not any(t.done() for t in tasks)  # nobody answered before the write
        gate.set()
        told = await asyncio.gather(*tasks)
        held.result(timeout=30)
        return told

    units = core.heartbeats.units
    assert len(asyncio.run(beat_all())) == len(fleet)
    core.store.db.trace(None)
    assert core.heartbeats.units - units == 1  # one unit of the writer…
    assert len(statements) == 1  # …one statement for the forty runners
    for i, r in enumerate(fleet):
        row = core.store.runner(r.id)
        assert row.last_seen_at == clock.now
        assert row.readings == {"cpu_percent": float(i), "memory_percent": 50.0 + i,
                                "free_slots": i % 3}
        assert row.peer_address == f"10.0.0.{i}"


def test_a_runner_heartbeating_twice_before_the_write_is_written_once_with_the_newest(
        core, owner, clock):
    runner = make_runner(core, owner)
    gate = threading.Event()

    async def twice():
        held = core.store.db.submit(lambda: gate.wait(30))
        first = asyncio.create_task(_beat(core, runner, 1))
        await _noted(core, runner.id, 1.0)
        clock.advance(2)
        second = asyncio.create_task(_beat(core, runner, 2))
        await _noted(core, runner.id, 2.0)
        gate.set()
        await asyncio.gather(first, second)
        held.result(timeout=30)

    written = core.heartbeats.written
    asyncio.run(twice())
    assert core.heartbeats.written - written == 1
    row = core.store.runner(runner.id)
    assert row.last_seen_at == clock.now and row.readings["cpu_percent"] == 2.0


def test_liveness_is_unchanged_a_silent_runner_is_offline_and_its_heartbeat_brings_it_back(
        core, owner, clock):
    runner = make_runner(core, owner)
    clock.advance(core.settings.offline_after + 1)
    assert not is_online(core.store.runner(runner.id), clock.now, core.settings.offline_after)
    ready = []
    core.signals.on_takers.append(lambda: ready.append(clock.now))

    async def beat():
        await _beat(core, runner, 1)
        await asyncio.sleep(0)  # the signal is raised on the loop after the commit

    asyncio.run(beat())
    assert ready  # back: waiting flights may go to it
    assert is_online(core.store.runner(runner.id), clock.now, core.settings.offline_after)
    ready.clear()
    asyncio.run(beat())  # online already: nothing to tell
    assert ready == []


def test_a_coalesced_heartbeat_writes_what_a_heartbeat_written_alone_writes(core, owner, clock):
    one, other = make_runner(core, owner, name="one"), make_runner(core, owner, name="other")
    for r in (one, other):  # a capability report on file, so its claims are told nothing
        check_in(core, r, capabilities={"isolation_levels": ["none"]})
    one, other = core.store.runner(one.id), core.store.runner(other.id)
    clock.advance(3)
    args = dict(readings={"cpu_percent": 7.0}, free_slots=2, peer_address="10.1.2.3",
                stated_policy=policy_digest(one.policy))  # it applies the policy: confirmed
    assert runners.heartbeat(core, one, **args) is None
    assert asyncio.run(runners.heartbeat_coalesced(core, other, **args)) is None
    a, b = core.store.runner(one.id), core.store.runner(other.id)
    assert a.checks_at == clock.now
    for field in ("last_seen_at", "readings", "peer_address", "checks_at"):
        assert getattr(a, field) == getattr(b, field), field


def test_a_retired_runners_heartbeat_is_refused_and_writes_nothing(core, owner, clock):
    from gg.errors import Forbidden

    runner = make_runner(core, owner)
    seen = core.store.runner(runner.id).last_seen_at
    core.store.update_runner(runner.id, retired_at=clock.now)
    clock.advance(1)
    with pytest.raises(Forbidden):
        asyncio.run(_beat(core, runner, 1))
    assert core.store.runner(runner.id).last_seen_at == seen


def test_with_nothing_ready_and_no_lease_due_the_claim_has_nothing_to_ask_the_writer(
        core, owner):
    """The dispatcher reads this before it takes a claim to the writer (a re-parked claim
    then parks without a trip there); a ready flight makes it go."""
    from gg.control import flights

    assert lease_ops.offer_state(core) == (False, None)
    flights.open_flight(core, owner, FlightSpec(command=["true"]))
    assert lease_ops.offer_state(core)[0] is True


def test_the_pull_pollers_read_of_its_runners_is_a_look_up_not_a_scan_of_the_fleet(
        core, owner):
    """A fleet's check-ins signal "may be ready" many times a second, and each signal wakes the
    pull poller, which reads the runners it polls: by the mode index (migration 871)."""
    if core.store.dialect != "sqlite":
        pytest.skip("the query plan is SQLite's")
    sql = "SELECT * FROM runners WHERE mode = ? AND retired_at IS NULL"
    plan = " ".join(str(row[3]) for row in core.store.db.all("EXPLAIN QUERY PLAN " + sql,
                                                              ("pull",)))
    assert "runners_mode" in plan, plan
