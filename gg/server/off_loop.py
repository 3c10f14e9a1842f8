"""Store work handed off the event loop.

The loop answers every parked claim, check-in and page, so it never reads or writes the store
itself (docs/architecture.md, "The loop never does store work"; ``gg.store.loop_guard`` checks
it). A route or a task of the loop hands a read to a worker thread with :func:`off_loop`, and
a write (or a read and its write) to the store's writer with ``core.run``; a route that does
nothing else is a plain ``def``, which FastAPI runs in its thread pool.

FastAPI validates and encodes what a route returns on the loop, even for a plain ``def``: a
page of hundreds of rows held every parked claim for tens of milliseconds. A route whose
answer can be long returns :func:`answered_off_loop` instead, which does both on the worker
thread, exactly as the route's response model would.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, TypeVar

from pydantic import TypeAdapter
from starlette.responses import Response

T = TypeVar("T")


def answer(adapter: TypeAdapter, value: Any, status: int = 200) -> Response:
    """Serialised as the route's response model serialises it (FastAPI's fast path)."""
    return Response(adapter.dump_json(adapter.validate_python(value), by_alias=True),
                    status_code=status, media_type="application/json")


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a worker thread; the loop answers others meanwhile."""
    return await asyncio.to_thread(fn, *args, **kwargs)


async def answered_off_loop(adapter: TypeAdapter, fn: Callable[..., Any], *args: Any,
                            **kwargs: Any) -> Response:
    """``fn(*args, **kwargs)`` on a worker thread, and its value validated and encoded there by
    ``adapter`` (the route's response model, made once at import)."""
    return await asyncio.to_thread(lambda: answer(adapter, fn(*args, **kwargs)))


async def encoded_off_loop(adapter: TypeAdapter, value: Any) -> Response:
    """``value`` (read already, say after a wait on the loop) validated and encoded by
    ``adapter`` on a worker thread."""
    return await asyncio.to_thread(answer, adapter, value)
