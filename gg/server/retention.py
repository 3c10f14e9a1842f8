"""The retention duty: prunes ended history off the hot path.

Every RETENTION_PERIOD it runs :func:`gg.control.retention.prune_batch` until a batch finds
nothing to do. Each batch is one short transaction of at most RETENTION_BATCH rows per table;
between batches the duty yields to the event loop (``asyncio.sleep``), so claims, check-ins
and hand-backs interleave with a long prune instead of waiting behind it.
"""

from __future__ import annotations

import asyncio
import logging

from gg.control import duties as duty_ops
from gg.control import retention
from gg.control.core import Core

log = logging.getLogger("gg.server")

BREATHE = 0.01  # seconds between two batches: room for the requests waiting on the loop


async def prune_all(core: Core) -> int:
    """Batches until nothing is left to prune; the number of batches that did work."""
    batches = 0
    while (await core.run(retention.prune_batch)).full:  # in the writer's turn
        batches += 1
        await asyncio.sleep(BREATHE)
    return batches


async def duty(core: Core, duties=None) -> None:
    while True:
        await asyncio.sleep(max(0.05, core.settings.retention_period))
        if duties is not None and not duties.holds(duty_ops.RETENTION):
            continue  # another replica prunes
        try:
            await prune_all(core)
        except Exception as exc:  # a busy store must not end the duty
            log.warning("retention: %s: %s", type(exc).__name__, exc)
