"""Store work never runs on the server's event loop.

The event loop answers every parked claim, check-in and page; a read or a write done on it
holds all of them up for as long as it takes (tens of milliseconds on a loaded host, seconds
when the database is away). So every store call is made from another thread: a route hands
its reads to a worker thread (``asyncio.to_thread``) and its writes to the writer's thread.

This module checks that rule where it can be broken, in the store itself: armed (the
server's ``GG_LOOP_GUARD`` setting, which the test suite turns on for every server it
starts), a statement or a transaction begun on a thread that is running an event loop raises
:class:`StoreOnTheLoop`, so a route that breaks the rule fails loudly in every test that
reaches it. Unarmed, the check is one attribute read per statement.
"""

from __future__ import annotations

import asyncio


class StoreOnTheLoop(RuntimeError):
    """A store call was made on the thread running the server's event loop."""


_armed = False


def arm(on: bool = True) -> None:
    """Turn the check on (the server does once it has started up) or off."""
    global _armed
    _armed = on


def check() -> None:
    """Raise when armed and called on a thread that runs an event loop."""
    if _armed and asyncio._get_running_loop() is not None:
        raise StoreOnTheLoop("a store call ran on the event loop: hand it to a worker thread "
                             "(asyncio.to_thread) or to the writer")

