"""A wake-up at the next attended flight's deadline, so somebody looks promptly.

The decision that an attended flight was "not taken promptly" is the clock comparison in
``gg.domain.attended`` made by whoever looks first (``leases.expire_due``). This only
arranges for the control plane itself to look at the earliest deadline, so that a follower
(``gg fly --attended --wait``) hears the end at once rather than at its next poll. Re-armed
whenever a flight is opened or changes (``signals.on_ready``) and after each look.
"""

from __future__ import annotations

import asyncio
import logging

from gg.control import attended as attended_ops
from gg.control import leases as lease_ops
from gg.control.core import Core
from gg.server.off_loop import off_loop

log = logging.getLogger("gg.server")


class AttendedWake:
    def __init__(self, core: Core):
        self.core = core
        self._handle: asyncio.TimerHandle | None = None
        self._at: float | None = None
        self._reading = False  # a read of the next deadline is under way (off the loop)
        self._again = False  # asked to arm again while it was
        core.signals.on_ready.append(self.arm)

    def arm(self) -> None:
        """Read the next deadline (on a worker thread) and look again then; asked again while
        a read is under way, that read is made once more when it ends."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # signalled outside the server's loop (a test driving use cases)
            return
        if self._reading:
            self._again = True
            return
        self._reading = True
        loop.create_task(self._read())

    async def _read(self) -> None:
        try:
            while True:
                self._again = False
                due = await off_loop(attended_ops.next_deadline, self.core)
                if not self._again:
                    break
        except Exception as exc:  # noqa: BLE001 - a busy store: the next signal arms again
            log.warning("attended deadlines: %s: %s", type(exc).__name__, exc)
            return
        finally:
            self._reading = False
        self._set(due)

    def _set(self, due: float | None) -> None:
        if due == self._at and self._handle is not None:
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._at = due
        if due is not None:
            delay = max(0.0, due - self.core.now()) + 0.01
            self._handle = asyncio.get_running_loop().call_later(delay, self._look)

    def _look(self) -> None:
        self._handle = None
        self._at = None
        asyncio.get_running_loop().create_task(self._expire())

    async def _expire(self) -> None:
        try:  # fails overdue attended flights too; in the writer's turn
            await self.core.run(lease_ops.expire_now)
        except Exception as exc:  # noqa: BLE001 - the next look records them
            log.warning("attended deadlines: %s: %s", type(exc).__name__, exc)
        self.arm()
