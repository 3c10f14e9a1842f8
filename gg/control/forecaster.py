"""The forecaster: a process of its own that plays the queue forward for start estimates.

A forecast of a queue of thousands is a hundred milliseconds and more of pure Python
(gg.domain.estimates.forecast). Played on a worker thread of the server it still holds the
interpreter's lock, and the event loop, which gives the lock up at every read and write of
a socket, waits for it again each time: a first page of ``gg flights`` then held up every
parked claim and check-in (docs/performance.md, "Forecasts away from the loop"). From
FORECAST_AWAY ready flights on, the server asks this process instead, and its thread waits on
a pipe, holding nothing.

The forecaster reads the same store as the server (its own connection to the SQLite file or
the PostgreSQL database) and plays the same code on the same inputs: the server sends the
time of the read, the flights whose estimates it needs, the limits its page asked
(placement by size) and the turnaround it remembers; the forecaster reads the queue, the
seats, the durations and the pools, and answers the page's estimates only. It keeps the
last run, as the server did (ESTIMATE_REUSE), so the pages of one listing share a run.

Started at the first read that needs it, and restarted at the next one after it died;
while it cannot answer, the server plays the forecast itself, so an estimate is never
missing for want of the process. It ends when the server does: its end of the pipe closes.
Memory-only SQLite stores (tests) cannot be shared with a process: they never use it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any, Mapping

from gg.domain.durations import Summary
from gg.domain.groups import Placement
from gg.domain.limits import Limits
from gg.settings import Settings

START_WAIT = 120.0  # seconds a new forecaster may take to import gg and open the store
ANSWER_WAIT = 120.0  # seconds one forecast may take on a loaded machine


@dataclass(frozen=True)
class Ask:
    """One read's question: the estimates of ``needed`` (None: the longest wait of each
    environment, for ``/metrics``) at ``now``."""

    now: float
    needed: tuple[str, ...] | None
    placement: Placement  # the groups and the fleet-wide stop the reader's seats were given
    sizes: Mapping[str, Limits]  # the limits the reader's flights asked (placement by size)
    turnaround: Summary


def store_target(store: Any) -> str | None:
    """What a process of its own opens to read ``store``; None for a memory-only one."""
    db = store.db
    url = getattr(db, "url", None)
    if url:
        return str(url)
    path = getattr(db, "path", None)
    if not path or getattr(db, "_memory", False):
        return None
    return str(path)


class Forecaster:
    """The server's side: one forecaster process, asked by one thread at a time."""

    def __init__(self, target: str, settings: Settings):
        self.target = target
        self.settings = replace(settings, forecast_away=0)  # the process plays it itself
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self.started = 0  # processes started (a restart after a death counts)

    def ask(self, question: Ask) -> Any | None:
        """The forecaster's answer, or None when it could not give one (then play it here)."""
        with self._lock:
            try:
                if self._proc is None:
                    self._start()
                assert self._send is not None and self._recv is not None
                self._send.send(question)
                if not self._recv.poll(ANSWER_WAIT):
                    raise TimeoutError("the forecaster did not answer")
                status, answer = self._recv.recv()
            except (OSError, EOFError, TimeoutError, AssertionError):
                self._stop()
                return None
            return answer if status == "ok" else None

    def _start(self) -> None:
        proc = subprocess.Popen([sys.executable, "-m", "gg.control.forecaster_process"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        self._proc = proc
        self._send = Connection(os.dup(proc.stdin.fileno()), readable=False)
        self._recv = Connection(os.dup(proc.stdout.fileno()), writable=False)
        proc.stdin.close()
        proc.stdout.close()
        self.started += 1
        self._send.send((self.target, self.settings))
        if not self._recv.poll(START_WAIT) or self._recv.recv() != "ready":
            raise TimeoutError("the forecaster did not start")

    def _stop(self) -> None:
        for conn in (self._send, self._recv):
            if conn is not None:
                conn.close()
        self._send = self._recv = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def close(self) -> None:
        with self._lock:
            self._stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None
