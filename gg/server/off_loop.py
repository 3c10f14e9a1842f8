"""Store work handed off the event loop.

The loop answers every parked claim, check-in and page, so it never reads or writes the store
itself (docs/architecture.md, "The loop never does store work"; ``gg.store.loop_guard`` checks
it). A route or a task of the loop hands a read to a worker thread with :func:`off_loop`, and
a write (or a read and its write) to the store's writer with ``core.run``; a route that does
nothing else is a plain ``def``, which FastAPI runs in its thread pool.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, TypeVar

T = TypeVar("T")


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a worker thread; the loop answers others meanwhile."""
    return await asyncio.to_thread(fn, *args, **kwargs)
