"""The forecaster's own process (gg.control.forecaster): questions in, estimates out.

Run by the server as ``python -m gg.control.forecaster_process``; it reads questions on its
stdin and answers on its stdout (pickled, framed by :class:`multiprocessing.connection.
Connection`) until its stdin ends, which is when the server ends.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

from gg.control import estimates as estimate_ops
from gg.control.core import Core
from gg.control.forecaster import Ask
from gg.domain.flights import Stage
from gg.store import Store


def answer(core: Core, question: Ask) -> Any:
    """What the server would have worked out itself, from this process's store."""
    core.estimates.turnaround = question.turnaround
    now = question.now
    seats = estimate_ops.fleet_seats(core, now, placement=question.placement)
    if any(s.room is not None for s in seats):  # one mapping every seat shares, as the reader's
        seats = [replace(s, sizes=question.sizes) for s in seats]
    if question.needed is None:
        return estimate_ops.forecast(core, seats, now).longest(
            core.store.flight_environments(Stage.READY.value))
    made = estimate_ops.forecast(core, seats, now, question.needed)
    return {fid: made.get(fid) for fid in question.needed}


def main() -> None:
    """Read questions from stdin and answer on stdout (pickled, framed), until stdin ends."""
    out = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)  # a stray print must not corrupt the answers
    inbox = Connection(os.dup(0), writable=False)
    target, settings = inbox.recv()
    clock = [0.0]
    core = Core(store=Store(target, pool_size=2), settings=settings, clock=lambda: clock[0])
    out.send("ready")
    while True:
        try:
            question = inbox.recv()
        except (EOFError, OSError):
            break
        clock[0] = question.now
        try:
            said: tuple[str, Any] = ("ok", answer(core, question))
        except Exception as exc:  # the server plays this one itself
            said = ("error", f"{type(exc).__name__}: {exc}")
            print(f"gg forecaster: {said[1]}", file=sys.stderr, flush=True)
        out.send(said)
    core.store.close()


if __name__ == "__main__":
    main()
