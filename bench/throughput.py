#!/usr/bin/env python3
"""End-to-end throughput: trivial flights per second with 1, 4 and 16 real runners.

    python bench/throughput.py [--quick] [--runners 16] [--flights N] [--repeats R] [--json]
                               [--openers P] [--opener-threads T] [--noise] [--history N]
                               [--settle SECONDS]
                               [--database postgresql://… [--replicas N]]

For each fleet size: a fresh control plane, that many ``gg runner up`` processes (one worker
each), then N flights running ``true`` opened by ``--openers`` processes (4) of
``--opener-threads`` concurrent clients (2) each — gg's own client, as ``gg fly`` opens one,
each with its own connection — while the runners drain them: the openers are processes of
their own so the bench measures gg, not its client. Throughput = N / (first ``opened_at`` →
last ``info:flight:landed``), both stamped by the control plane. Every flight must land
exactly once. The load average is recorded at the start and end of every run (the machine
may be shared); before each run the bench waits at most ``--settle`` seconds (120) for it
to fall under 2. CPU per flight is summed over every process: the server, the runners, their
launchers and flights, and the openers (their CPU while opening, read by each from its own
resource usage).

``--noise`` runs bench/noise.py's noise during each measured run (a core spinning,
``gg flights`` every 250 ms, ``gg runners`` every second); the server's CPU then includes
serving those listings. The event loop's lag over the measured runs is read from
``/metrics`` (``gg_event_loop_lag_seconds``, the difference before and after each run).

``--history N``: after the warm-up, its landed flights are copied (with their grants, facts
and events) until the store holds N landed flights, and PostgreSQL is analysed, as its
autovacuum would have done by then (bench/history.py): a control plane that has run for
months, rather than a store made for the run, whose first minutes PostgreSQL plans as if
its tables were empty.

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

import history  # noqa: E402
import httpx  # noqa: E402
import loop_lag  # noqa: E402
from common import (  # noqa: E402
    Bench,
    check_store_options,
    publish,
    store_label,
    store_options,
    summary,
)
from noise import Noise, describe, noise_option  # noqa: E402

from gg.api import paths  # noqa: E402
from gg.client import Client  # noqa: E402
from gg.store import Store  # noqa: E402


def _auth(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


def _opener(urls: list[str], token: str, count: int, threads: int, ready, go, out) -> None:
    """One opener process: ``threads`` concurrent clients (gg's own, as ``gg fly`` opens a
    flight, each with its own connection, taking turns among the replicas) open ``count``
    flights between them once ``go`` is set; it answers the ids and its own CPU seconds spent
    opening (its start-up, imports included, is not counted: it is done before ``go``)."""
    import resource

    clients = [Client(urls[k % len(urls)], token, timeout=60) for k in range(threads)]
    per = -(-count // threads) if count else 0
    chunks = [range(i, min(i + per, count)) for i in range(0, count, per)] if count else []
    ready.put(os.getpid())
    go.wait()
    before = resource.getrusage(resource.RUSAGE_SELF)

    def open_all(k: int) -> list[str]:
        return [clients[k].request("POST", paths.FLIGHTS, json={"command": ["true"]})["id"]
                for _ in chunks[k]]

    with ThreadPoolExecutor(max(1, len(chunks))) as pool:
        ids = [fid for part in pool.map(open_all, range(len(chunks))) for fid in part]
    after = resource.getrusage(resource.RUSAGE_SELF)
    out.put({"ids": ids, "cpu_s": (after.ru_utime + after.ru_stime)
             - (before.ru_utime + before.ru_stime)})


def _gather(queue, procs: list, timeout: float) -> list:
    """One answer from each of ``procs`` on ``queue``, or one sentence when one of them died."""
    import queue as queues

    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < len(procs):
        try:
            got.append(queue.get(timeout=1.0))
        except queues.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError("an opener process died (its traceback is above)") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"the openers did not answer within {timeout:g}s") from None
    return got


def open_flights(bench: Bench, flights: int, openers: int, threads: int) -> tuple[list[str], float, float]:
    """``flights`` flights opened by ``openers`` processes of ``threads`` clients each: the
    ids, the seconds from the go to the last answer, and the openers' CPU seconds."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    urls = [bench.url_of(k) for k in range(len(bench.servers))]
    shares = [flights // openers + (1 if k < flights % openers else 0) for k in range(openers)]
    procs = [ctx.Process(target=_opener, daemon=True,
                         args=(urls[k % len(urls):] + urls[:k % len(urls)], bench.token,
                               shares[k], threads, ready, go, out))
             for k in range(openers)]
    for p in procs:
        p.start()
    try:
        _gather(ready, procs, 120)
        started = time.monotonic()
        go.set()
        parts = _gather(out, procs, 600)
        opened_in = time.monotonic() - started
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return ([fid for part in parts for fid in part["ids"]], opened_in,
            sum(part["cpu_s"] for part in parts))


def one_run(bench: Bench, flights: int, timeout: float, openers: int = 4,
            threads: int = 2, since: int = 0) -> dict:
    """One measured run; ``since``: the last event's seq before it (a history's events are
    not read again)."""
    token = bench.token
    local = {"load": round(os.getloadavg()[0], 2)}
    ids, opened_in, opener_cpu = open_flights(bench, flights, openers, threads)
    with httpx.Client(base_url=bench.url, timeout=60) as http:
        deadline = time.monotonic() + timeout
        wanted = set(ids)
        # Read the landed events incrementally (``after``): rereading all of them five times
        # a second cost the server CPU in proportion to the run's length, which the CPU per
        # flight below then counted as the flights' own.
        landed, after = [], since
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
                          params={"kind": "info:flight:opened", "limit": 10000,
                                  "after": since}).json()
        first = min(e["at"] for e in opened if e["flight_id"] in wanted)
        last = max(e["at"] for e in landed if e["flight_id"] in wanted)
        landed_counts = {}
        for e in landed:
            landed_counts[e["flight_id"]] = landed_counts.get(e["flight_id"], 0) + 1
        assert all(landed_counts.get(f) == 1 for f in wanted), "a flight landed twice"
    local.update(seconds=last - first, opened_in=opened_in, per_second=flights / (last - first),
                 opener_cpu_s=opener_cpu, load_at_end=round(os.getloadavg()[0], 2))
    return local


def cpu_split(bench: Bench) -> dict[str, float]:
    """CPU seconds (user + system) so far: the server, the runner processes, their launchers
    (one long-lived process per runner that forks the flights), and the flights' own processes
    (the reaped children of the runners and of their launchers: the isolation, the command)."""
    import psutil

    out = {"server": 0.0, "runners": 0.0, "launchers": 0.0, "flights": 0.0}
    database = database_cpu(bench)
    if database is not None:  # PostgreSQL on this machine: its processes are the flights' too
        out["database"] = database
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


def database_cpu(bench: Bench) -> float | None:
    """CPU seconds (user + system) so far of the PostgreSQL server holding the bench's
    database: its postmaster, every process it runs (the backends of the replicas'
    connections, the WAL writer, the checkpointer) and those it reaped; None on SQLite or
    when that server is not a process of this machine."""
    import urllib.parse

    import psutil

    url = getattr(bench, "database_url", None)
    if not url:
        return None
    port = str(urllib.parse.urlsplit(url).port or 5432)
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if proc.info["name"] != "postgres" or "-p" not in cmd[:-1]:
            continue
        if cmd[cmd.index("-p") + 1] != port:
            continue
        total = 0.0
        for p in [proc, *proc.children(recursive=True)]:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
            if p is proc:
                total += t.children_user + t.children_system
        return total
    return None


def write_turns(bench: Bench) -> dict[str, float]:
    """The writers' group commits so far, summed over every replica (``/metrics``): how many,
    the units they carried, and their seconds by phase."""
    import re

    out = {"commits": 0.0, "units": 0.0, "begin": 0.0, "work": 0.0, "commit": 0.0, "turn": 0.0}
    for server in bench.servers:
        text = httpx.get(f"{server.url}/metrics", timeout=60).text
        out["commits"] += float(re.search(r"^gg_store_commits_total (\S+)$", text, re.M)[1])
        out["units"] += float(re.search(r"^gg_store_commit_units_total (\S+)$", text, re.M)[1])
        for phase in ("begin", "work", "commit"):
            out[phase] += float(re.search(
                rf'^gg_store_commit_seconds_total{{phase="{phase}"}} (\S+)$', text, re.M)[1])
        turn = re.search(r"^gg_store_events_turn_seconds_total (\S+)$", text, re.M)
        out["turn"] += float(turn[1]) if turn else 0.0  # (a server from before it: none)
    return out


def lag_reading(bench: Bench) -> dict:
    """``gg_event_loop_lag_seconds`` now, summed over every replica."""
    total = loop_lag.read("")
    for server in bench.servers:
        total = loop_lag.add(total, loop_lag.read(httpx.get(f"{server.url}/metrics", timeout=60).text))
    return total


def settle(below: float = 2.0, longest: float = 120.0) -> None:
    """Wait (at most ``longest`` seconds) until the 1-minute load average is under ``below``:
    back-to-back runs would otherwise each start on the load the one before left."""
    deadline = time.monotonic() + longest
    while os.getloadavg()[0] >= below and time.monotonic() < deadline:
        time.sleep(1.0)


def made_history(bench: Bench, landed: int) -> dict:
    """The bench's store made one that has run for months (bench/history.py): its warm-up's
    landed flights copied until it holds ``landed`` of them, PostgreSQL analysed as its
    autovacuum would have; what was added, and the last event's seq (``since``)."""
    target = bench.database_url or bench.server.data_dir / "gg.sqlite3"
    store = Store(target, pool_size=1)
    try:
        with store.atomic():
            made = history.fill(store.db, landed)
        history.analyse(store.db)
        made["since"] = store.db.one("SELECT max(seq) FROM events")[0] or 0
        return made
    finally:
        store.close()


def run(sizes: list[int], flights: int, repeats: int, database: str | None = None,
        replicas: int = 1, openers: int = 4, threads: int = 2, noise: bool = False,
        past: int = 0, settling: float = 120.0) -> dict:
    results = {}
    filled: dict = {}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix=f"gg-bench-tp{size}-") as tmp:
            bench = Bench(Path(tmp), database=database, replicas=replicas).start()
            try:
                for i in range(size):
                    bench.runner(f"r{i}", server=bench.url_list(i))
                bench.wait_online(size)
                one_run(bench, min(flights, 20), 120, openers, threads)  # warm-up
                filled = made_history(bench, past) if past else {}
                since = filled.get("since", 0)
                runs, spent, turns, noises = [], {}, {}, []
                lag = loop_lag.read("")
                for _ in range(repeats):
                    settle(longest=settling)  # a run starts on a machine its predecessor left
                    with Noise(bench.url, bench.token, on=noise) as made:
                        before, turns_before = cpu_split(bench), write_turns(bench)
                        lag_before = lag_reading(bench)
                        runs.append(one_run(bench, flights, 60 + flights / 2, openers, threads,
                                            since))
                        after, turns_after = cpu_split(bench), write_turns(bench)
                        lag = loop_lag.add(lag, loop_lag.between(lag_before, lag_reading(bench)))
                    noises.append(made.report)
                    after["openers"] = before.get("openers", 0.0) + runs[-1]["opener_cpu_s"]
                    spent = {k: spent.get(k, 0.0) + after[k] - before.get(k, 0.0) for k in after}
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
            "loads_at_end": [r["load_at_end"] for r in runs],
            # CPU per flight, ms, over the measured runs (warm-up and settling excluded)
            "cpu_ms_per_flight": {k: round(v * 1000 / (flights * repeats), 2)
                                  for k, v in spent.items()},
            # the server's event loop over the measured runs (every replica's, summed)
            "loop_lag": loop_lag.figures(lag),
            "noise": noises,
            # the writers' group commits over the measured runs (every replica's, summed; the
            # bench's own reads of the event feed commit nothing)
            "write_turns": {
                "commits_per_flight": round(turns["commits"] / (flights * repeats), 2),
                "units_per_commit": round(turns["units"] / commits, 2),
                "ms_per_commit": {k: round(turns[k] * 1000 / commits, 3)
                                  for k in ("begin", "work", "commit", "turn")},
                "writer_ms_per_flight": round(
                    sum(turns[k] for k in ("begin", "work", "commit")) * 1000
                    / (flights * repeats), 3),
            },
        }
        print(f"{size} runner(s): {results[str(size)]['per_second']} "
              f"lag {results[str(size)]['loop_lag']} cpu {results[str(size)]['cpu_ms_per_flight']}",
              file=sys.stderr)
    return {"flights": flights, "repeats": repeats, "sizes": results, "noise": noise,
            "openers": openers, "opener_threads": threads,
            "store": store_label(database, replicas),
            "history": {k: v for k, v in filled.items() if k != "since"}}


def markdown(r: dict) -> str:
    openers = (f"{r.get('openers', 1)} opener processes of {r.get('opener_threads', 8)} "
               "concurrent clients each")
    lines = [f"End-to-end throughput ({r.get('store', 'SQLite, 1 server')}): {r['flights']} "
             f"flights running `true`, opened by {openers} (gg's own client, as `gg fly` uses) "
             f"while the fleet drains them, {r['repeats']} runs per fleet size "
             "(target: ≥ 500 flights/s with 16 runners on an idle machine, CPU per flight of "
             "every process ≤ 3 ms)."
             + (f" The store held {made['landed']:,} landed flights before the measured runs "
                "(the warm-up's copied, bench/history.py)." if (made := r.get("history")) else "")
             + "\n",
             "| runners (`gg runner up`, 1 worker each) | flights/s median | min | max | "
             "seconds for all, median | opening alone, flights/s | load average at each run's "
             "start → end |",
             "|---|---|---|---|---|---|---|"]
    for size, s in r["sizes"].items():
        p = s["per_second"]
        loads = ", ".join(f"{a:g} → {b:g}" for a, b in zip(s["loads"], s.get("loads_at_end", s["loads"]), strict=False))
        lines.append(f"| {size} | {p['p50']:g} | {p['min']:g} | {p['max']:g} | "
                     f"{s['seconds']['p50']:g} | {s['open_per_second']['p50']:g} | {loads} |")
    lines += ["", "CPU per flight (user + system, ms, over the measured runs):", "",
              "| runners | `gg server` | the `gg runner up` processes | their launchers "
              "| the flights' own processes | the openers | the database's (PostgreSQL) | all |",
              "|---|---|---|---|---|---|---|---|"]
    for size, s in r["sizes"].items():
        c = s["cpu_ms_per_flight"]
        database = f"{c['database']:g}" if "database" in c else "–"
        lines.append(f"| {size} | {c['server']:g} | {c['runners']:g} | "
                     f"{c.get('launchers', 0):g} | {c['flights']:g} | {c.get('openers', 0):g} | "
                     f"{database} | {round(sum(c.values()), 2):g} |")
    lines += ["", "The server's event loop over the measured runs (`gg_event_loop_lag_seconds`, "
              "the difference of `/metrics` before and after each run; a percentile is the "
              "bucket it falls in):", "",
              "| runners | lag p50 ms | p99 ms | max ms | mean ms | wake-ups |",
              "|---|---|---|---|---|---|"]
    for size, s in r["sizes"].items():
        lag = s.get("loop_lag")
        if lag is None:
            continue
        lines.append(f"| {size} | {loop_lag.shown(lag['p50_ms'])} | {loop_lag.shown(lag['p99_ms'])} | "
                     f"{loop_lag.shown(lag['max_ms'])} | {lag['mean_ms']} | {lag['n']} |")
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
                     f"{ms['begin']:g} / {ms['work']:g} / {ms['commit']:g}"
                     # of the commit, the wait for the events' turn (PostgreSQL)
                     f"{f' (turn {t:g})' if (t := ms.get('turn')) else ''} | "
                     f"{w['writer_ms_per_flight']:g} |")
    lines.append("")
    for size, s in r["sizes"].items():
        for k, made in enumerate(s.get("noise", [])):
            lines.append(f"{size} runners, run {k + 1}: {describe(made)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 flights, 2 runs per size")
    ap.add_argument("--runners", default="16")
    ap.add_argument("--flights", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--openers", type=int, default=4,
                    help="processes opening the flights, each with its own clients")
    ap.add_argument("--opener-threads", type=int, default=2,
                    help="concurrent clients in each opener process")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    noise_option(ap)
    ap.add_argument("--section", default=None, metavar="NAME",
                    help="the section of docs/performance.md to write (default: the bench's "
                         "own, with -noise after it under --noise)")
    ap.add_argument("--history", type=int, default=0, metavar="N",
                    help="after the warm-up, copy its landed flights until the store holds N "
                         "(a store that has run for months: bench/history.py)")
    ap.add_argument("--settle", type=float, default=120.0, metavar="SECONDS",
                    help="before each run, wait at most this long for the load average to fall "
                         "under 2 (0: start at once, as a test on a busy machine does)")
    store_options(ap)
    args = ap.parse_args(argv)
    check_store_options(args)
    if args.openers < 1 or args.opener_threads < 1:
        raise SystemExit("--openers and --opener-threads take a number of at least 1")
    if args.history < 0:
        raise SystemExit("--history takes a number of landed flights, 0 or more")
    if args.settle < 0:
        raise SystemExit("--settle takes a number of seconds, 0 or more")
    sizes = [int(x) for x in args.runners.split(",") if x.strip()]
    flights = args.flights or (100 if args.quick else 2000)
    repeats = args.repeats or (2 if args.quick else 3)
    result = run(sizes, flights, repeats, args.database, args.replicas, args.openers,
                 args.opener_threads, args.noise, args.history, args.settle)
    text = markdown(result)
    name = "throughput" if not args.database else f"throughput-postgresql-{args.replicas}"
    name += "-history" if args.history else ""
    publish(args.section or name + ("-noise" if args.noise else ""), text, result, args)
    return result


if __name__ == "__main__":
    main()
