"""Store work handed off the event loop.

The loop answers every parked claim, check-in and page, so it never reads or writes the store
itself (docs/architecture.md, "The loop never does store work"; ``gg.store.loop_guard`` checks
it). A route or a task of the loop hands a read to a worker thread with :func:`off_loop`, and
a write (or a read and its write) to the store's writer with ``core.run``; a route that does
nothing else is a plain ``def``, which FastAPI runs in its thread pool.

FastAPI validates and encodes what a route returns on the loop, even for a plain ``def``: a
page of hundreds of rows held every parked claim for tens of milliseconds. A route whose
answer is a long list returns :func:`answered_off_loop` or :func:`encoded_off_loop` instead:
both validate and encode on the worker thread, a row at a time (``gg.server.encoded``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, TypeVar

from pydantic import TypeAdapter
from starlette.responses import Response

from gg.server import encoded

T = TypeVar("T")


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a worker thread; the loop answers others meanwhile."""
    return await asyncio.to_thread(fn, *args, **kwargs)


async def answered_off_loop(row: TypeAdapter, fn: Callable[..., list], *args: Any,
                            **kwargs: Any) -> Response:
    """The list ``fn(*args, **kwargs)`` returns, read and encoded row by row (``row``: the
    response model's row, made once at import) on a worker thread."""
    def read_and_encode() -> Response:
        return Response(encoded.rows(row, fn(*args, **kwargs)), media_type="application/json")
    return await asyncio.to_thread(read_and_encode)


async def encoded_off_loop(row: TypeAdapter, rows: list) -> Response:
    """``rows`` (read already, say after a wait on the loop) encoded row by row on a worker
    thread."""
    return await asyncio.to_thread(
        lambda: Response(encoded.rows(row, rows), media_type="application/json"))
