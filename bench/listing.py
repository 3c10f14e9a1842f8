#!/usr/bin/env python3
"""The first page of ``gg flights`` over HTTP with a big backlog (target ≤ 300 ms).

    python bench/listing.py [--flights 10000] [--runners 1000] [--limit 200] [--repeat 15]
                            [--lag-window 20] [--checkin-runners 500]

Fills a real control plane's store with ``--runners`` online runners of varied labels and
``--flights`` ready flights (the fill of bench/placement.py with ``busy``): every runner is
healthy and flies one flight, so the ready flights wait on runners that will free up (or, in
other ways, on runners that cannot take them) and every row of the page carries its waiting
sentence; a history of durations gives the flights the runners can take a start estimate
(``expected_start_at``). Then times ``GET /v1/flights`` (the first page, ``--limit`` rows,
every waiting reason and start estimate computed) over HTTP as ``gg flights`` asks for it,
and following the cursor to the second page. A first page with no row whose start is
estimated measures nothing worth having: the bench then stops with one sentence.

Every timed request plays the queue forward afresh: the server runs with GG_ESTIMATE_REUSE=0,
so no request is answered from the run of the one before (on a live queue every open and grant
ends a run's reuse anyway). The server's own CPU per request is read from its process, and the
use case's CPU is measured in process on the same store; the second page read inside the reuse
window of the first (how ``gg flights --all`` pages) is measured in process too.

Then the event loop beside the listings (``--lag-window`` seconds each, 0 leaves it out):
``--checkin-runners`` runners registered over the API (unlabelled, so they take none of the
queue) check in 20 times a second in turn, first alone and then while the first page is
listed every 250 ms (a new request as soon as one answers when one takes longer). ``gg_event_loop_lag_seconds`` is read
from ``/metrics`` before and after each window: its p50/p99 are the bucket bounds the
window's observations reach, beside the check-ins' p50/p99 as the runners see them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import checkins  # noqa: E402
import httpx  # noqa: E402
import psutil  # noqa: E402
from common import TABLE_HEAD, cpu_of, row, summary, write_section  # noqa: E402
from placement import fill, keep_online  # noqa: E402

from gg.launch import LocalServer, free_port  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flights", type=int, default=10_000)
    ap.add_argument("--runners", type=int, default=1_000)
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="2,000 flights × 200 runners, 7 runs")
    ap.add_argument("--lag-window", type=float, default=20.0,
                    help="seconds of check-ins measured alone, then beside listings (0: none)")
    ap.add_argument("--checkin-runners", type=int, default=200)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.flights, args.runners, args.repeat = 2000, 200, 7
    root = Path(tempfile.mkdtemp(prefix="gg-bench-listing-"))
    server = LocalServer(root / "data", free_port(), log=root / "server.log",
                         env={"GG_OFFLINE_AFTER": "3600", "GG_LEASE_TTL": "3600",
                              "GG_ESTIMATE_REUSE": "0", "GG_KEY_NONCE_RATE": "0"})
    server.start()
    try:
        fill(root / "data", args.runners, args.flights, busy=True)
        keep_online(root / "data")
        load = os.getloadavg()[0]
        http = httpx.Client(base_url=server.url, timeout=120,
                            headers={"authorization": f"Bearer {server.owner_token()}"})

        def page(cursor: str | None = None) -> dict:
            params = {"limit": args.limit, **({"cursor": cursor} if cursor else {})}
            r = http.get("/v1/flights", params=params)
            r.raise_for_status()
            return r.json()

        first = page()
        waiting = [r["waiting"] for r in first["items"] if r["waiting"]]
        estimated = [r for r in first["items"] if r["expected_start_at"] is not None]
        print(f"first page: {len(first['items'])} rows, {len(estimated)} with an estimated "
              "start time", flush=True)
        if not estimated:
            raise SystemExit("the first page has no row with an estimated start time, so it "
                             "would time a listing without estimates; check the fill")
        proc = psutil.Process(server.proc.pid)

        def server_cpu() -> float:
            times = proc.cpu_times()
            return times.user + times.system

        def away_cpu() -> float:  # the forecaster (gg.control.forecaster), when one started
            return cpu_of(proc.children(recursive=True))

        firsts, seconds, firsts_cpu, firsts_away = [], [], [], []
        for _ in range(args.repeat):
            c, a = server_cpu(), away_cpu()
            t = time.perf_counter()
            got = page()
            firsts.append((time.perf_counter() - t) * 1000)
            if not any(r["expected_start_at"] is not None for r in got["items"]):
                raise SystemExit("a timed first page had no row with an estimated start time")
            firsts_cpu.append((server_cpu() - c) * 1000)
            firsts_away.append((away_cpu() - a) * 1000)
            t = time.perf_counter()
            page(got["next_cursor"])
            seconds.append((time.perf_counter() - t) * 1000)
        from gg.control import flights
        from gg.control.core import Core
        from gg.settings import Settings
        from gg.store import open_store

        core = Core(store=open_store(root / "data"),
                    settings=Settings(offline_after=3600, lease_ttl=3600, estimate_reuse=0))
        cpu, without, reused = [], [], []
        for _ in range(args.repeat):  # the use case's own CPU: what the load cannot inflate
            t = time.process_time()
            flights.list_flights(core, limit=args.limit)
            cpu.append((time.process_time() - t) * 1000)
        kept = flights.estimate_ops.add_to_rows
        flights.estimate_ops.add_to_rows = lambda *a, **k: None
        try:
            for _ in range(args.repeat):  # the same page with the estimate step left out
                t = time.process_time()
                flights.list_flights(core, limit=args.limit)
                without.append((time.process_time() - t) * 1000)
        finally:
            flights.estimate_ops.add_to_rows = kept
        paging = Core(store=core.store, settings=Settings(offline_after=3600, lease_ttl=3600))
        for _ in range(args.repeat):  # paging: the second page inside the first's reuse window
            paging.last_forecast = None
            got = flights.list_flights(paging, limit=args.limit)
            t = time.process_time()
            flights.list_flights(paging, limit=args.limit, cursor=got["next_cursor"])
            reused.append((time.process_time() - t) * 1000)
        lag = (loop_lag(server.url, page, http, args) if args.lag_window > 0 else None)
        text = "\n".join([
            f"{args.flights:,} ready flights × {args.runners:,} online runners, each flying "
            f"one flight; a page of {args.limit} rows, {len(waiting)} of them with their "
            f"waiting sentence ({len(set(waiting))} distinct) and {len(estimated)} with an "
            "estimated start time; "
            f"every request plays the queue afresh (GG_ESTIMATE_REUSE=0); load average "
            f"{load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end "
            "(target: first page ≤ 300 ms over HTTP).\n", TABLE_HEAD,
            row("GET /v1/flights, first page (HTTP)", summary(firsts)),
            row("GET /v1/flights, first page: the server process's CPU", summary(firsts_cpu)),
            row("GET /v1/flights, first page: the forecaster process's CPU",
                summary(firsts_away)),
            row("GET /v1/flights?cursor=…, second page (HTTP)", summary(seconds)),
            row("first page, server-side CPU of the use case (in process)", summary(cpu)),
            row("the same, without the start estimates (in process)", summary(without)),
            row("second page inside the first's reuse window, CPU (in process)",
                summary(reused)), *(lag_rows(lag) if lag else [])])
        print(text)
        if not args.no_write:
            write_section("listing", text)
        return {"first": summary(firsts), "first_server_cpu": summary(firsts_cpu),
                "second": summary(seconds), "cpu": summary(cpu), "without": summary(without),
                "reused": summary(reused), "load": load, "lag": lag}
    finally:
        server.stop()


def _lag_buckets(url: str) -> dict[float, float]:
    """``gg_event_loop_lag_seconds``'s cumulative buckets: upper bound (s) -> count."""
    out = {}
    for name, value in checkins.scrape(url).items():
        if name.startswith("gg_event_loop_lag_seconds_bucket{"):
            bound = name.split('le="', 1)[1].split('"', 1)[0]
            out[float(bound)] = value
    return out


def _lag_quantiles(before: dict[float, float], after: dict[float, float]) -> dict:
    """The window's lag p50/p99/max as the bucket bounds (ms) its observations reach."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0

    def reach(q: float) -> float | None:
        for b, c in zip(bounds, counts, strict=True):
            if total and c >= q * total:
                return b * 1000
        return None
    return {"p50": reach(0.5), "p99": reach(0.99), "max": reach(1.0), "n": int(total)}


def _lister(page, stop: threading.Event, lists: list[float], window_from: float,
            window_to: float) -> None:
    """The first page every 250 ms inside the window (at once after one that took longer)."""
    while not stop.is_set():
        t = time.perf_counter()
        if window_from <= time.time() <= window_to:
            page()
            lists.append((time.perf_counter() - t) * 1000)
        stop.wait(max(0.0, 0.25 - (time.perf_counter() - t)))


CHECK_INS_PER_SECOND = 20


def _checkins(url: str, credentials: list[str], stop: threading.Event, took: list[float],
              errors: list[int]) -> None:
    """Full check-ins (readings, capabilities) of the registered runners in turn,
    CHECK_INS_PER_SECOND of them, each timed. Not heartbeat claims: with a backlog none of
    these runners can take, a claim reads the whole ready queue (see docs/performance.md),
    which would measure the claim, not what a listing does to the loop."""
    body = {"free_slots": 1, "readings": checkins.READINGS, "version": checkins.__version__,
            "capabilities": checkins.CAPABILITIES}
    with httpx.Client(base_url=url, timeout=120) as http:
        i = 0
        while not stop.is_set():
            t = time.perf_counter()
            r = http.post(checkins.CHECK_IN, json=body,
                          headers={"authorization": f"Bearer {credentials[i % len(credentials)]}"})
            took.append((time.perf_counter() - t) * 1000)
            if r.status_code >= 400:
                errors.append(r.status_code)
            i += 1
            stop.wait(max(0.0, 1 / CHECK_INS_PER_SECOND - (time.perf_counter() - t)))


def loop_lag(url: str, page, http: httpx.Client, args) -> dict:
    """Check-ins alone, then beside a first page every 250 ms: the loop's lag and the
    check-ins' latency in each window, with the machine's load."""
    token = http.headers["authorization"].split(" ", 1)[1]
    credentials = asyncio.run(checkins.register(url, token, args.checkin_runners))
    out: dict = {}
    for name, listing in (("alone", False), ("listing", True)):
        window_from = time.time() + 3.0
        window_to = window_from + args.lag_window
        stop = threading.Event()
        took: list[float] = []
        errors: list[int] = []
        lists: list[float] = []
        driver = threading.Thread(target=_checkins, args=(url, credentials, stop, took, errors),
                                  daemon=True)
        driver.start()
        while time.time() < window_from:
            time.sleep(0.05)
        took.clear()
        before, load_from = _lag_buckets(url), os.getloadavg()[0]
        thread = (threading.Thread(target=_lister, args=(page, stop, lists, window_from,
                                                         window_to), daemon=True)
                  if listing else None)
        if thread:
            thread.start()
        while time.time() < window_to:
            time.sleep(0.1)
        after = _lag_buckets(url)
        stop.set()
        for t in (driver, thread):
            if t:
                t.join()
        out[name] = {"lag": _lag_quantiles(before, after), "check_in": summary(took),
                     "errors": len(errors), "listings": summary(lists),
                     "load": (round(load_from, 2), round(os.getloadavg()[0], 2))}
        print(name, out[name], flush=True)
    return out


def lag_rows(lag: dict) -> list[str]:
    rows = []
    for name, said in (("alone", "check-ins alone"),
                       ("listing", "check-ins beside a first page every 250 ms")):
        r = lag[name]
        load = f"load {r['load'][0]:.2f} → {r['load'][1]:.2f}"
        q = r["lag"]
        rows.append(row(f"event loop lag, {said} ({load}; bucket bounds reached)",
                        {"p50": q["p50"], "p99": q["p99"], "min": None, "max": q["max"],
                         "n": q["n"]}))
        rows.append(row(f"full check-in, {said} ({r['errors']} errors)",
                        r["check_in"]))
        if name == "listing":
            rows.append(row("first page (HTTP) beside the check-ins", r["listings"]))
    return rows


if __name__ == "__main__":
    main()
