#!/usr/bin/env python3
"""The first page of ``gg flights`` over HTTP with a big backlog (target ≤ 300 ms).

    python bench/listing.py [--flights 10000] [--runners 1000] [--limit 200] [--repeat 15]

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
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import psutil  # noqa: E402

from common import TABLE_HEAD, row, summary, write_section  # noqa: E402
from placement import fill, keep_online  # noqa: E402

from gg.launch import LocalServer, free_port  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flights", type=int, default=10_000)
    ap.add_argument("--runners", type=int, default=1_000)
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="2,000 flights × 200 runners, 7 runs")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.flights, args.runners, args.repeat = 2000, 200, 7
    root = Path(tempfile.mkdtemp(prefix="gg-bench-listing-"))
    server = LocalServer(root / "data", free_port(), log=root / "server.log",
                         env={"GG_OFFLINE_AFTER": "3600", "GG_LEASE_TTL": "3600",
                              "GG_ESTIMATE_REUSE": "0"})
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

        firsts, seconds, firsts_cpu = [], [], []
        for _ in range(args.repeat):
            c = server_cpu()
            t = time.perf_counter()
            got = page()
            firsts.append((time.perf_counter() - t) * 1000)
            if not any(r["expected_start_at"] is not None for r in got["items"]):
                raise SystemExit("a timed first page had no row with an estimated start time")
            firsts_cpu.append((server_cpu() - c) * 1000)
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
            row("GET /v1/flights?cursor=…, second page (HTTP)", summary(seconds)),
            row("first page, server-side CPU of the use case (in process)", summary(cpu)),
            row("the same, without the start estimates (in process)", summary(without)),
            row("second page inside the first's reuse window, CPU (in process)",
                summary(reused))])
        print(text)
        if not args.no_write:
            write_section("listing", text)
        return {"first": summary(firsts), "first_server_cpu": summary(firsts_cpu),
                "second": summary(seconds), "cpu": summary(cpu), "without": summary(without),
                "reused": summary(reused), "load": load}
    finally:
        server.stop()


if __name__ == "__main__":
    main()
