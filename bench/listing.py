#!/usr/bin/env python3
"""The first page of ``gg flights`` over HTTP with a big backlog (target ≤ 300 ms).

    python bench/listing.py [--flights 10000] [--runners 1000] [--limit 200] [--repeat 15]

Fills a real control plane's store with ``--runners`` online runners of varied labels and
``--flights`` ready flights whose requirements none of them meets in different ways (the same
fill as bench/placement.py), so every row of the page carries its waiting sentence. Then times
``GET /v1/flights`` (the first page, ``--limit`` rows, every waiting reason computed) over HTTP
as ``gg flights`` asks for it, and following the cursor to the second page.
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
                         env={"GG_OFFLINE_AFTER": "3600", "GG_LEASE_TTL": "3600"})
    server.start()
    try:
        fill(root / "data", args.runners, args.flights)
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
        firsts, seconds = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            got = page()
            firsts.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            page(got["next_cursor"])
            seconds.append((time.perf_counter() - t) * 1000)
        from gg.control import flights
        from gg.control.core import Core
        from gg.settings import Settings
        from gg.store import open_store

        core = Core(store=open_store(root / "data"),
                    settings=Settings(offline_after=3600, lease_ttl=3600))
        cpu = []
        for _ in range(args.repeat):  # the use case's own CPU: what the load cannot inflate
            t = time.process_time()
            flights.list_flights(core, limit=args.limit)
            cpu.append((time.process_time() - t) * 1000)
        text = "\n".join([
            f"{args.flights:,} ready flights × {args.runners:,} online runners; a page of "
            f"{args.limit} rows, {len(waiting)} of them with their waiting sentence "
            f"({len(set(waiting))} distinct); load average {load:.1f} at the start "
            "(target: first page ≤ 300 ms over HTTP).\n", TABLE_HEAD,
            row("GET /v1/flights, first page (HTTP)", summary(firsts)),
            row("GET /v1/flights?cursor=…, second page (HTTP)", summary(seconds)),
            row("first page, server-side CPU of the use case (in process)", summary(cpu))])
        print(text)
        if not args.no_write:
            write_section("listing", text)
        return {"first": summary(firsts), "second": summary(seconds), "cpu": summary(cpu),
                "load": load}
    finally:
        server.stop()


if __name__ == "__main__":
    main()
