"""The background duties this replica holds (gg.control.duties), renewed in the background.

With SQLite there is one server and it holds every duty without asking. With a store shared
by replicas, a task takes or renews the duties every ``renew_every`` seconds, and each loop
(the liveness watch, retention, the hooks' outbox) asks :meth:`Duties.holds` before it works.
A replica that cannot renew (the database is away) stops counting itself as the holder when
its hold would have lapsed, so two replicas never both believe they hold a duty for long.
"""

from __future__ import annotations

import asyncio
import logging
import time

from gg.control import duties as duty_ops
from gg.control.core import Core
from gg.store import wakeups

log = logging.getLogger("gg.server")


class Duties:
    def __init__(self, core: Core):
        self.core = core
        self.shared = wakeups.shared(core.store.db)
        self.held: set[str] = set()
        self._until = 0.0  # monotonic: when the last renewal lapses

    def holds(self, name: str) -> bool:
        if not self.shared:
            return True
        return name in self.held and time.monotonic() < self._until

    async def run(self) -> None:
        if not self.shared:
            return
        while True:
            asked = time.monotonic()
            try:
                self.held = await self.core.run(duty_ops.take, durable=False)
                self._until = asked + self.core.settings.duty_ttl * 0.9
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is away: hold nothing until it is back
                log.warning("duties: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(duty_ops.renew_every(self.core))

    async def give_up(self) -> None:
        """The server stops: its duties are free for another replica at once."""
        if not self.shared:
            return
        self.held = set()
        try:
            await self.core.run(duty_ops.give_up)
        except Exception as exc:  # noqa: BLE001 - they lapse by themselves
            log.warning("giving up duties: %s: %s", type(exc).__name__, exc)
