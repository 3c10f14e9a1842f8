"""The opens' bodies ``gg fly`` builds, taken instead of sent while a flights file is read.

``gg fly --file`` parses each flight of the file with ``gg fly``'s own flags
(gg.cli.flights_file): while :func:`collecting` lasts, ``gg fly`` hands the body it built to
:func:`taken` and opens nothing."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_BODIES: ContextVar[list | None] = ContextVar("gg_fly_file_bodies", default=None)


@contextmanager
def collecting() -> Iterator[list[dict]]:
    """While it lasts, the bodies ``gg fly`` builds are added to the list it gives."""
    bodies: list[dict] = []
    token = _BODIES.set(bodies)
    try:
        yield bodies
    finally:
        _BODIES.reset(token)


def taken(body: dict) -> bool:
    """Whether ``body`` was collected (then it is not to be sent)."""
    bodies = _BODIES.get()
    if bodies is None:
        return False
    bodies.append(body)
    return True
