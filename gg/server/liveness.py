"""The liveness watch: records a runner going silent, and a pool's maintainer going silent,
even when nobody else is looking.

Going offline is a clock comparison (``now - last_seen_at >= OFFLINE_AFTER``), and whoever
looks first records ``warn:runner:aged_out`` once per offline episode: a check-in of any
runner, a listing of runners, or this watch, which looks a few times per OFFLINE_AFTER so
that ``gg events --follow`` sees the episode promptly on an otherwise idle fleet. A pool
whose last attestation is older than POOL_ATTESTATION_STALE is recorded the same way
(``warn:pool:stale``, once per episode): by a listing of pools, or by this watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI

from gg.control import duties as duty_ops
from gg.control import leases as lease_ops
from gg.control import pools as pool_ops
from gg.control.core import Core
from gg.control.runners import notice_silence, silence_due
from gg.server import retention
from gg.server.duties import Duties
from gg.server.off_loop import off_loop
from gg.store import loop_guard

log = logging.getLogger("gg.server")


def period(core: Core) -> float:
    return min(5.0, max(0.2, core.settings.offline_after / 4))


async def watch(core: Core, duties: Duties | None = None) -> None:
    while True:
        await asyncio.sleep(period(core))
        if duties is not None and not duties.holds(duty_ops.LIVENESS):
            continue  # another replica keeps this watch
        try:
            # reads on a worker thread; the writes, when due, in the writer's turn
            if await off_loop(silence_due, core, core.now()):
                await core.run(notice_silence)
            if await off_loop(pool_ops.stale_due, core, core.now()):
                await core.run(pool_ops.notice_stale_pools)
        except Exception as exc:  # a busy store must not end the watch
            log.warning("liveness watch: %s: %s", type(exc).__name__, exc)


@asynccontextmanager
async def lifespan(app: FastAPI):
    # A restart honours every lease one LEASE_TTL counted from now, when the server is about
    # to hear renewals, not from when the app was built (a loaded machine can take seconds
    # between the two, and those seconds would come out of the runners' window).
    lease_ops.honour_after_restart(app.state.core)
    app.state.core.signals.loop = asyncio.get_running_loop()  # subscribers are woken on it
    replicas = getattr(app.state, "replicas", None)
    if replicas is not None:  # wake-ups from the other replicas (gg.server.replicas)
        replicas.start()
    duties: Duties = app.state.duties
    tasks = [asyncio.create_task(duties.run()),
             asyncio.create_task(watch(app.state.core, duties)),
             asyncio.create_task(retention.duty(app.state.core, duties))]
    loop_lag = getattr(app.state, "loop_lag", None)
    if loop_lag is not None:  # how late the loop wakes (gg.server.loop_lag, GET /metrics)
        tasks.append(asyncio.create_task(loop_lag.run()))
    pauses = getattr(app.state, "collector_pauses", None)
    if pauses is not None:  # how long the garbage collector held it (gg.server.collector_pauses)
        pauses.start()
    outbox = getattr(app.state, "outbox", None)
    if outbox is not None:  # the hooks' deliveries (gg.server.hooks)
        tasks.append(asyncio.create_task(outbox.run()))
    poller = getattr(app.state, "poller", None)
    if poller is not None:  # the pull-mode runners (gg.server.pull)
        tasks.append(asyncio.create_task(poller.run()))
    # Started up: from now on no store call runs on this loop (gg.store.loop_guard)
    loop_guard.arm(app.state.core.settings.loop_guard == "on")
    try:
        yield
    finally:
        loop_guard.arm(False)  # stopping: what is left to do may use the store at once
        if pauses is not None:
            pauses.stop()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await duties.give_up()
        if replicas is not None:
            replicas.stop()
