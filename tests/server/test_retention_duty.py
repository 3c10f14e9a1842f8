"""The retention duty prunes in many small batches and yields to the event loop between
them, so other work on the loop runs while a long prune is under way."""

from __future__ import annotations

import asyncio

from gg.control import flights, retention
from gg.control.core import Core
from gg.control.people import bootstrap
from gg.control.wiring import wired
from gg.domain.flight_spec import FlightSpec
from gg.server.retention import prune_all
from gg.settings import Settings
from gg.store import open_store

DAY = 86400.0


def test_a_long_prune_runs_as_bounded_batches_with_the_loop_free_between_them(tmp_path, clock):
    core = Core(store=open_store(tmp_path), clock=clock,
                settings=Settings(retain_flights=DAY, retain_events=0, retention_batch=3), wiring=wired())
    bootstrap(core, tmp_path)
    owner = core.store.person_by_name("owner")
    for _ in range(12):
        flights.cancel(core, owner, flights.open_flight(core, owner, FlightSpec(command=["true"])).id)
    clock.advance(2 * DAY)
    seen: list[int] = []  # flights left, as the neighbour saw them

    async def main():
        done = asyncio.Event()

        async def neighbour():  # another coroutine on the same loop, as a request would be
            while not done.is_set():
                seen.append(core.store.db.one("SELECT count(*) FROM flights")[0])
                await asyncio.sleep(0)

        other = asyncio.create_task(neighbour())
        batches = await prune_all(core)
        done.set()
        await other
        return batches

    batches = asyncio.run(main())
    assert core.store.db.one("SELECT count(*) FROM flights")[0] == 0
    assert batches >= 12 // 3  # at most 3 rows per table per batch
    assert len({left for left in seen if 0 < left < 12}) >= 2  # ran between the batches
    assert not retention.prune_batch(core).full
