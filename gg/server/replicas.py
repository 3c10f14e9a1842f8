"""This server as one replica of several sharing a PostgreSQL store (docs/scale-out.md).

Wake-ups cross replicas: every signal this replica raises is announced to the others
(``gg.store.wakeups``: NOTIFY, delivered when its transaction commits), tagged with this
replica's name so that it does not hear itself; every announcement heard from another
replica is raised here on the event loop, exactly as if a use case had raised it locally:
a flight opened on replica A answers a claim parked on replica B, an event recorded on A
ends a ``gg events --follow`` served by B, and a drain decided on A reaches the runner whose
claim is parked on B. A runner credential that changed or died on A (renewed, superseded,
retired, forgotten) is dropped from every replica's credential cache the same way. A
console whose person and runner reached different replicas is relayed on the same channel
(``gg.server.relay.SharedRelay``), sent on a connection of its own so that keystrokes never
wait for a commit. With SQLite there is one server and none of this is set up.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import TYPE_CHECKING, cast

from gg.control.core import Core
from gg.server.dispatch import Dispatcher
from gg.server.relay import SharedRelay
from gg.store import wakeups

if TYPE_CHECKING:
    from gg.store.postgres import PgDatabase


class Replicas:
    def __init__(self, core: Core, dispatcher: Dispatcher):
        self.core = core
        self.name = secrets.token_hex(6)  # this process, for as long as it lives
        self.loop: asyncio.AbstractEventLoop | None = None
        self.listener: wakeups.Listener | None = None
        db = cast("PgDatabase", core.store.db)  # replicas share a PostgreSQL store (wanted)
        core.signals.announce = lambda line: wakeups.announce(db, f"{self.name} {line}")
        # a runner's credential changed or died here: every replica drops what it cached
        core.credentials.on_forget = lambda runner_id: wakeups.announce(
            db, f"{self.name} c {runner_id}")
        # a lease granted by another replica: claims parked here look when it is due
        core.signals.on_flight.append(dispatcher.lease_may_have_started)
        # consoles whose two sides reached different replicas
        self.sender = wakeups.Sender(db.url, lost=lambda: self._on_loop(self.relay.missed))
        self.relay = SharedRelay(self.name, self.sender.send)

    @staticmethod
    def wanted(core: Core) -> bool:
        return wakeups.shared(core.store.db)

    def start(self) -> None:
        """Listen (on the running event loop's behalf) until :meth:`stop`."""
        self.loop = asyncio.get_running_loop()
        db = cast("PgDatabase", self.core.store.db)  # replicas share a PostgreSQL store
        self.listener = wakeups.Listener(db.url, self._heard, self._missed)
        self.listener.start()

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.stop()
            self.listener = None
        self.sender.stop()

    def _on_loop(self, fn, *args) -> None:  # from a thread of ours
        if self.loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                self.loop.call_soon_threadsafe(fn, *args)

    def _heard(self, payload: str) -> None:  # the listener's thread
        sender, _, line = payload.partition(" ")
        if sender == self.name:
            return
        if line.startswith("c "):  # the cache has a lock of its own: dropped here, at once
            self.core.credentials.forget(line[2:], told=False)
            return
        if line.startswith("console "):
            self._on_loop(self.relay.heard, line[len("console "):])
            return
        if self.loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed
            self.loop.call_soon_threadsafe(self.core.signals.heard, line)

    def _missed(self) -> None:  # the listener's thread
        self.core.credentials.clear()  # what it would have been told to forget is unknown
        self._on_loop(self.core.signals.missed)
        self._on_loop(self.relay.missed)
