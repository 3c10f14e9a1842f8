#!/usr/bin/env python3
"""End-to-end throughput: trivial flights per second with 1, 4 and 16 real runners.

    python bench/throughput.py [--quick] [--runners 16] [--flights N] [--repeats R] [--json]
                               [--database postgresql://… [--replicas N]]

For each fleet size: a fresh control plane, that many ``gg runner up`` processes (one worker
each), then N flights running ``true`` opened by 8 concurrent openers (gg's own client, as
``gg fly`` opens one) while the runners drain them. Throughput = N / (first ``opened_at`` → last ``info:flight:landed``), both
stamped by the control plane. Every flight must land exactly once. The load average is
recorded at the start of every run (the machine may be shared).

With ``--database`` the control plane keeps its store in PostgreSQL (a fresh database per
fleet size) and ``--replicas N`` runs N servers on it: the openers take turns among the
replicas, and runner i is given every replica's URL starting with replica i (mod N).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402

from gg.api import paths  # noqa: E402
from gg.client import Client  # noqa: E402

from common import (Bench, check_store_options, emit, store_label, store_options, summary,  # noqa: E402
                    write_section)


def _auth(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


def one_run(bench: Bench, flights: int, timeout: float) -> dict:
    token = bench.token
    local = {"load": round(os.getloadavg()[0], 2)}

    def opener(k: int, chunk: range) -> list[str]:
        # gg's own client, as `gg fly` opens a flight (openers take turns among replicas): its
        # CPU shares the machine with the fleet, and httpx costs ~5x more of it per request.
        client = Client(bench.url_of(k), token, timeout=60)
        return [client.request("POST", paths.FLIGHTS, json={"command": ["true"]})["id"]
                for _ in chunk]

    per = -(-flights // 8)
    chunks = [range(i, min(i + per, flights)) for i in range(0, flights, per)]
    started = time.monotonic()
    with ThreadPoolExecutor(len(chunks)) as pool:
        ids = [fid for part in pool.map(opener, range(len(chunks)), chunks) for fid in part]
    opened_in = time.monotonic() - started
    with httpx.Client(base_url=bench.url, timeout=60) as http:
        deadline = time.monotonic() + timeout
        wanted = set(ids)
        # Read the landed events incrementally (``after``): rereading all of them five times
        # a second cost the server CPU in proportion to the run's length, which the CPU per
        # flight below then counted as the flights' own.
        landed, after = [], 0
        while True:
            page = http.get("/v1/events", headers=_auth(token),
                            params={"kind": "info:flight:landed", "limit": 10000,
                                    "after": after}).json()
            landed += page
            after = max([after] + [e["seq"] for e in page])
            done = {e["flight_id"] for e in landed} & wanted
            if len(done) == len(wanted):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(done)}/{len(wanted)} flights landed in {timeout:g}s")
            time.sleep(0.2)
        opened = http.get("/v1/events", headers=_auth(token),
                          params={"kind": "info:flight:opened", "limit": 10000}).json()
        first = min(e["at"] for e in opened if e["flight_id"] in wanted)
        last = max(e["at"] for e in landed if e["flight_id"] in wanted)
        landed_counts = {}
        for e in landed:
            landed_counts[e["flight_id"]] = landed_counts.get(e["flight_id"], 0) + 1
        assert all(landed_counts.get(f) == 1 for f in wanted), "a flight landed twice"
    local.update(seconds=last - first, opened_in=opened_in, per_second=flights / (last - first))
    return local


def cpu_split(bench: Bench) -> dict[str, float]:
    """CPU seconds (user + system) so far: the server, the runner processes, their launchers
    (one long-lived process per runner that forks the flights), and the flights' own processes
    (the reaped children of the runners and of their launchers: the isolation, the command)."""
    import psutil

    out = {"server": 0.0, "runners": 0.0, "launchers": 0.0, "flights": 0.0}
    for s in bench.servers:  # every replica
        t = psutil.Process(s.proc.pid).cpu_times()
        out["server"] += t.user + t.system
    for r in bench.runners:
        t = psutil.Process(r.proc.pid).cpu_times()
        out["runners"] += t.user + t.system
        out["flights"] += t.children_user + t.children_system
        for child in psutil.Process(r.proc.pid).children():  # the launcher, while it runs
            try:
                c = child.cpu_times()
            except psutil.Error:
                continue
            out["launchers"] += c.user + c.system
            out["flights"] += c.children_user + c.children_system
    return out


def write_turns(bench: Bench) -> dict[str, float]:
    """The writers' group commits so far, summed over every replica (``/metrics``): how many,
    the units they carried, and their seconds by phase."""
    import re

    out = {"commits": 0.0, "units": 0.0, "begin": 0.0, "work": 0.0, "commit": 0.0}
    for server in bench.servers:
        text = httpx.get(f"{server.url}/metrics", timeout=60).text
        out["commits"] += float(re.search(r"^gg_store_commits_total (\S+)$", text, re.M)[1])
        out["units"] += float(re.search(r"^gg_store_commit_units_total (\S+)$", text, re.M)[1])
        for phase in ("begin", "work", "commit"):
            out[phase] += float(re.search(
                rf'^gg_store_commit_seconds_total{{phase="{phase}"}} (\S+)$', text, re.M)[1])
    return out


def settle(below: float = 2.0, longest: float = 120.0) -> None:
    """Wait (at most ``longest`` seconds) until the 1-minute load average is under ``below``:
    back-to-back runs would otherwise each start on the load the one before left."""
    deadline = time.monotonic() + longest
    while os.getloadavg()[0] >= below and time.monotonic() < deadline:
        time.sleep(1.0)


def run(sizes: list[int], flights: int, repeats: int, database: str | None = None,
        replicas: int = 1) -> dict:
    results = {}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix=f"gg-bench-tp{size}-") as tmp:
            bench = Bench(Path(tmp), database=database, replicas=replicas).start()
            try:
                for i in range(size):
                    bench.runner(f"r{i}", server=bench.url_list(i))
                bench.wait_online(size)
                one_run(bench, min(flights, 20), 120)  # warm-up
                runs, spent, turns = [], {}, {}
                for _ in range(repeats):
                    settle()  # each run starts on a machine its predecessor no longer loads
                    before, turns_before = cpu_split(bench), write_turns(bench)
                    runs.append(one_run(bench, flights, 60 + flights / 2))
                    after, turns_after = cpu_split(bench), write_turns(bench)
                    spent = {k: spent.get(k, 0.0) + after[k] - before[k] for k in after}
                    turns = {k: turns.get(k, 0.0) + turns_after[k] - turns_before[k]
                             for k in turns_after}
            finally:
                bench.stop()
        commits = max(turns["commits"], 1.0)
        results[str(size)] = {
            "per_second": summary([r["per_second"] for r in runs], 1),
            "seconds": summary([r["seconds"] for r in runs], 2),
            "open_per_second": summary([flights / r["opened_in"] for r in runs], 1),
            "loads": [r["load"] for r in runs],
            # CPU per flight, ms, over the measured runs (warm-up and settling excluded)
            "cpu_ms_per_flight": {k: round(v * 1000 / (flights * repeats), 2)
                                  for k, v in spent.items()},
            # the writers' group commits over the measured runs (every replica's, summed; the
            # bench's own reads of the event feed commit nothing)
            "write_turns": {
                "commits_per_flight": round(turns["commits"] / (flights * repeats), 2),
                "units_per_commit": round(turns["units"] / commits, 2),
                "ms_per_commit": {k: round(turns[k] * 1000 / commits, 3)
                                  for k in ("begin", "work", "commit")},
                "writer_ms_per_flight": round(
                    sum(turns[k] for k in ("begin", "work", "commit")) * 1000
                    / (flights * repeats), 3),
            },
        }
        print(f"{size} runner(s): {results[str(size)]['per_second']}", file=sys.stderr)
    return {"flights": flights, "repeats": repeats, "sizes": results,
            "store": store_label(database, replicas)}


def markdown(r: dict) -> str:
    lines = [f"End-to-end throughput ({r.get('store', 'SQLite, 1 server')}): {r['flights']} "
             "flights running `true`, opened by 8 "
             f"concurrent clients (gg's own, as `gg fly` uses) while the fleet drains them, {r['repeats']} runs per fleet size "
             "(target: ≥ 300 flights/s with 16 runners).\n",
             "| runners (`gg runner up`, 1 worker each) | flights/s median | min | max | "
             "seconds for all, median | opening alone, flights/s | load average at each run's start |",
             "|---|---|---|---|---|---|---|"]
    for size, s in r["sizes"].items():
        p = s["per_second"]
        lines.append(f"| {size} | {p['p50']:g} | {p['min']:g} | {p['max']:g} | "
                     f"{s['seconds']['p50']:g} | {s['open_per_second']['p50']:g} | "
                     f"{', '.join(f'{x:g}' for x in s['loads'])} |")
    lines += ["", "CPU per flight (user + system, ms, over the measured runs):", "",
              "| runners | `gg server` | the `gg runner up` processes | their launchers "
              "| the flights' own processes | all |", "|---|---|---|---|---|---|"]
    for size, s in r["sizes"].items():
        c = s["cpu_ms_per_flight"]
        lines.append(f"| {size} | {c['server']:g} | {c['runners']:g} | "
                     f"{c.get('launchers', 0):g} | {c['flights']:g} | "
                     f"{round(sum(c.values()), 2):g} |")
    lines += ["", "The writers' group commits over the measured runs (`/metrics`, every "
              "replica's summed):", "",
              "| runners | commits a flight | units a commit | a commit's ms: begin (the write "
              "lock) / work / commit (the flush) | the writer's ms a flight |",
              "|---|---|---|---|---|"]
    for size, s in r["sizes"].items():
        w = s.get("write_turns")
        if w is None:
            continue
        ms = w["ms_per_commit"]
        lines.append(f"| {size} | {w['commits_per_flight']:g} | {w['units_per_commit']:g} | "
                     f"{ms['begin']:g} / {ms['work']:g} / {ms['commit']:g} | "
                     f"{w['writer_ms_per_flight']:g} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 flights, 2 runs per size")
    ap.add_argument("--runners", default="16")
    ap.add_argument("--flights", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    store_options(ap)
    args = ap.parse_args(argv)
    check_store_options(args)
    sizes = [int(x) for x in args.runners.split(",") if x.strip()]
    flights = args.flights or (100 if args.quick else 2000)
    repeats = args.repeats or (2 if args.quick else 3)
    result = run(sizes, flights, repeats, args.database, args.replicas)
    text = markdown(result)
    print(text, file=sys.stderr if args.json else sys.stdout)
    if not args.no_write:
        write_section("throughput" if not args.database
                      else f"throughput-postgresql-{args.replicas}", text)
    emit(result, args.json)
    return result


if __name__ == "__main__":
    main()
