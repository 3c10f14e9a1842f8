"""Noise: what a busy day puts beside a control plane, for a benchmark's ``--noise``.

A real control plane shares its host and is listed by people while runners check in. While
the benchmark runs, :class:`Noise` keeps up, in processes of its own:

- one core of CPU burned by a Python process spinning (another tenant of the machine);
- ``gg flights`` listed every 250 ms and ``gg runners`` every second, as an admin, against
  the benchmark's server: the requests the CLI makes (gg's own client: the first page of the
  flights listing, 200 rows, and the runners table's page, the oldest 500 and whether there
  are more), one thread each, so a slow flights page
  does not hold the runners listing back. A call that takes longer than its period is
  followed by the next at once, never by a pile-up.

What the listings saw (their latency, how many, errors) comes back in :attr:`Noise.report`,
with the load average when the noise started and stopped.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import time

# What a bench says of its noise (bench/common.py writes it in each section's first line)
NOISE_RAN = "noise ran (bench/noise.py)"
NO_NOISE = "no noise (nothing else started by the benchmark)"
NO_NOISE_SENTENCE = NO_NOISE[0].upper() + NO_NOISE[1:] + "."

FLIGHTS_EVERY = 0.25  # seconds between two `gg flights`
RUNNERS_EVERY = 1.0  # seconds between two `gg runners`
SPIN = "while True:\n    pass\n"


def _listing(url: str, token: str, every: float, what: str, stop, out: list, errors: list) -> None:
    from gg.cli.runners import RUNNERS_SHOWN
    from gg.client import Client

    client = Client(url, token, timeout=60)
    due = time.monotonic()
    while not stop.is_set():
        started = time.perf_counter()
        try:
            if what == "flights":
                client.flights(limit=200)  # `gg flights`: the first page
            else:
                client.runners(RUNNERS_SHOWN + 1)  # `gg runners`: its table's page
            out.append((time.perf_counter() - started) * 1000)
        except Exception as exc:  # a listing that failed is a figure, not a crash
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
        due = max(due + every, time.monotonic())
        stop.wait(max(0.0, due - time.monotonic()))


def _lister(url: str, token: str, stop, results) -> None:
    """The listing process: `gg flights` and `gg runners` on their periods until ``stop``."""
    got = {"flights": [], "runners": []}
    errors: list[str] = []
    threads = [threading.Thread(target=_listing, daemon=True,
                                args=(url, token, every, what, stop, got[what], errors))
               for what, every in (("flights", FLIGHTS_EVERY), ("runners", RUNNERS_EVERY))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put({"flights_ms": got["flights"], "runners_ms": got["runners"], "errors": errors})


class Noise:
    """``with Noise(url, token, on=...)``: the noise above while the block runs (nothing at all
    when ``on`` is false, so a benchmark reads the same with and without)."""

    def __init__(self, url: str, token: str, *, on: bool = True):
        self.url, self.token, self.on = url, token, on
        self.report: dict = {"noise": on}
        self._spinner: subprocess.Popen | None = None
        self._process = None
        self._stop = None
        self._results = None

    def __enter__(self) -> "Noise":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Noise":
        self.report["load_at_start"] = round(os.getloadavg()[0], 2)
        if not self.on:
            return self
        ctx = multiprocessing.get_context("spawn")
        self._spinner = subprocess.Popen([sys.executable, "-c", SPIN])
        self._stop, self._results = ctx.Event(), ctx.Queue()
        self._process = ctx.Process(target=_lister, daemon=True,
                                    args=(self.url, self.token, self._stop, self._results))
        self._process.start()
        return self

    def stop(self) -> None:
        """Stop the noise (again: nothing) and gather what the listings saw."""
        if "load_at_end" in self.report:
            return
        self.report["load_at_end"] = round(os.getloadavg()[0], 2)
        if not self.on or self._process is None:
            return
        self._stop.set()
        try:
            got = self._results.get(timeout=120)
        except Exception:  # the listing process died: say so in the figures
            got = {"flights_ms": [], "runners_ms": [], "errors": ["the listing process died"]}
        self._process.join(timeout=30)
        if self._process.is_alive():
            self._process.kill()
        self._spinner.kill()
        self._spinner.wait()
        from common import summary

        self.report.update(flights_ms=summary(got["flights_ms"], 1),
                           runners_ms=summary(got["runners_ms"], 1),
                           listing_errors=len(got["errors"]),
                           first_errors=got["errors"][:3])


def noise_option(ap) -> None:
    """``--noise``, as every benchmark that takes it spells it."""
    ap.add_argument("--noise", action="store_true",
                    help="while measuring: one core burned by another process, `gg flights` "
                         "listed every 250 ms and `gg runners` every second (bench/noise.py)")


def describe(report: dict) -> str:
    """One sentence for docs/performance.md: whether noise ran and what the listings saw."""
    if not report.get("noise"):
        return NO_NOISE_SENTENCE
    f, r = report["flights_ms"], report["runners_ms"]
    return (f"Noise ran (one core spinning; `gg flights` every 250 ms: {f['n']} listings, "
            f"p50 {f['p50']} / p99 {f['p99']} / max {f['max']} ms; `gg runners` every second: "
            f"{r['n']} listings, p50 {r['p50']} / p99 {r['p99']} / max {r['max']} ms; "
            f"{report['listing_errors']} listing errors).")
