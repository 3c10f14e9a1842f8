"""A wake-up at the next attended flight's deadline, so somebody looks promptly.

The decision that an attended flight was "not taken promptly" is the clock comparison in
``gg.domain.attended`` made by whoever looks first (``leases.expire_due``). This only
arranges for the control plane itself to look at the earliest deadline, so that a follower
(``gg fly --attended --wait``) hears the end at once rather than at its next poll. Re-armed
whenever a flight is opened or changes (``signals.on_ready``) and after each look.
"""

from __future__ import annotations

import asyncio

from gg.control import attended as attended_ops
from gg.control import leases as lease_ops
from gg.control.core import Core


class AttendedWake:
    def __init__(self, core: Core):
        self.core = core
        self._handle: asyncio.TimerHandle | None = None
        self._at: float | None = None
        core.signals.on_ready.append(self.arm)

    def arm(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # signalled outside the server's loop (a test driving use cases)
            return
        due = attended_ops.next_deadline(self.core)
        if due == self._at and self._handle is not None:
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._at = due
        if due is not None:
            delay = max(0.0, due - self.core.now()) + 0.01
            self._handle = loop.call_later(delay, self._look)

    def _look(self) -> None:
        self._handle = None
        self._at = None
        lease_ops.expire_now(self.core)  # fails overdue attended flights too
        self.arm()
