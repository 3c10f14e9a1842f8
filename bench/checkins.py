#!/usr/bin/env python3
"""Heartbeats: thousands of simulated runners at the real 15 s interval, each holding a claim.

    python bench/checkins.py [--quick] [--runners N] [--procs P] [--window S] [--json]
                             [--noise] [--database postgresql://… [--replicas N]]

Each simulated runner speaks the real protocol over loopback: registered through
``POST /v1/runners`` with its own Ed25519 key, one full check-in (its capability report), then
it keeps one claim parked that carries its readings and re-parks every CHECK_IN_INTERVAL: the
claim is its check-in (docs/lease-protocol.md, "Heartbeats"). The runners are spread over
``--procs`` simulator processes (asyncio, one plain keep-alive connection per parked claim), so
the simulator is not the bottleneck; each reports its own CPU beside the server's.

Measured over ``--window`` seconds once every runner holds a parked claim: the first check-ins
come in one interval, and the window starts when that wave is absorbed (99 % of the runners
parked, one interval on at the least); how long that took is printed beside the figures:

- check-in latency: a heartbeat claim with ``wait: 0`` sent by a probe in every simulator
  process several times a second on the simulated runners' own credentials (the heartbeat is
  written and answered "nothing for you" at once): p50/p99 as the client sees it;
- re-park overshoot: how much later than its ``wait`` a parked claim is answered (the event
  loop's lag under the whole fleet); 0 for one answered within it (the server ends each
  heartbeat claim at a moment of its wait's last ``GG_CLAIM_WAIT_SPREAD`` seconds);
- server CPU (share of one core) and RSS (psutil on the server's pid), the simulators' CPU;
- parked claims (``gg_claims_parked``, the most read every 5 s inside the measured window)
  and RSS per parked claim: (RSS with every claim parked − RSS with the fleet registered and
  none parked) / parked claims.

``--noise`` runs bench/noise.py's noise from the simulators' start to the window's end (a
core spinning, ``gg flights`` every 250 ms, ``gg runners`` every second: the table's page of
the oldest 500 runners). The event loop's lag over the window is read
from ``/metrics`` (``gg_event_loop_lag_seconds``, the difference before and after), and
with it the garbage collector's walks of every object (``gg_gc_pause_seconds``, generation 2).

With ``--database`` the store is PostgreSQL (a fresh database) and ``--replicas N`` spreads
the simulated runners over N servers: simulator process i speaks to replica i (mod N), so
each replica holds its share of the parked claims. The server figures are then the sum over
the replicas (CPU, RSS, parked claims); PostgreSQL's own processes are not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import loop_lag  # noqa: E402
import psutil  # noqa: E402
from common import check_store_options, publish, store_label, store_options, summary  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from noise import Noise, describe, noise_option  # noqa: E402

from gg import __version__, keys  # noqa: E402

CLAIM = "/v1/runner/claim"
CHECK_IN = "/v1/runner/check-in"
READINGS = {"cpu_percent": 3.5, "memory_percent": 41.0, "memory_available": 8_000_000_000}
CAPABILITIES = {"isolation": ["none", "sandbox"], "egress_cut": True, "tools": {"git": True}}
GC_PAUSES = "gg_gc_pause_seconds"
PROBES_PER_SECOND = 20  # per simulator process


def _key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(os.urandom(32))


def lag_reading(urls: list[str]) -> tuple[dict, dict]:
    """``gg_event_loop_lag_seconds`` now, and the oldest generation's collections of
    ``gg_gc_pause_seconds``, each summed over every replica (an empty reading of a replica
    that does not answer in time)."""
    lag, pauses = loop_lag.read(""), loop_lag.read("")
    for url in urls:
        try:
            text = httpx.get(url + "/metrics", timeout=120).text
        except httpx.HTTPError:
            text = ""
        lag = loop_lag.add(lag, loop_lag.read(text))
        pauses = loop_lag.add(pauses, loop_lag.read(text, GC_PAUSES, 'generation="2"'))
    return lag, pauses


def scrape(url: str) -> dict[str, float]:
    """``/metrics`` as a dict; empty when an overloaded server does not answer in time."""
    out: dict[str, float] = {}
    try:
        text = httpx.get(url + "/metrics", timeout=120).text
    except httpx.HTTPError:
        return out
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


class Wire:
    """One keep-alive HTTP/1.1 connection, the bare minimum for the runner protocol.

    httpx's async pool scans its connections on every request, so one client holding ten
    thousand parked claims spends its time in the pool, not on the wire, and the figures
    would measure the simulator. Each simulated runner therefore parks its claim on a plain
    connection of its own, and check-ins share a pool of them; the requests carry what a
    runner sends (its credential, free slots, readings, version).
    """

    def __init__(self, host: str, port: int, token: str | None = None):
        self.host, self.port = host, port
        self.auth = f"Bearer {token}"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict, token: str | None = None) -> int:
        payload = json.dumps(body).encode()
        auth = f"Bearer {token}" if token else self.auth
        head = (f"POST {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
                f"authorization: {auth}\r\ncontent-type: application/json\r\n"
                f"user-agent: gg-bench\r\ncontent-length: {len(payload)}\r\n\r\n").encode()
        for attempt in (1, 2):
            try:
                if self.writer is None:
                    self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
                self.writer.write(head + payload)
                status = int((await self.reader.readline()).split()[1])
                length = 0
                while True:
                    line = await self.reader.readline()
                    if line in (b"\r\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                if length:
                    await self.reader.readexactly(length)
                return status
            except (ConnectionError, asyncio.IncompleteReadError, IndexError, ValueError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def register(url: str, token: str, count: int) -> list[str]:
    """Register ``count`` runners over the real API, 32 at a time."""
    sem = asyncio.Semaphore(32)
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        async def one(i: int) -> str:
            key = _key()
            body = {"name": f"sim-{i}", "workers": 1, "version": __version__}
            async with sem:
                for attempt in range(6):  # the same key again just supersedes: safe to retry
                    try:
                        n = await http.post("/v1/key-nonces", json={
                            "purpose": "register", "public_key": keys.public_text(key)})
                        n.raise_for_status()
                        proof = keys.prove(key, "register", n.json()["nonce"])
                        r = await http.post("/v1/runners", json={**body, **proof},
                                            headers={"authorization": f"Bearer {token}"})
                        r.raise_for_status()
                        return r.json()["credential"]
                    except httpx.TransportError:
                        if attempt == 5:
                            raise
                        await asyncio.sleep(0.5 * (attempt + 1))
            raise AssertionError("unreachable")
        return list(await asyncio.gather(*(one(i) for i in range(count))))


def simulate(url: str, credentials: list[str], interval: float, start_at: float,
             window, out) -> None:
    """One simulator process: its runners check in once, then heartbeat by parked claims;
    ``window``: a shared (from, to), set by the bench once every runner is parked."""
    result = asyncio.run(_simulate(url, credentials, interval, start_at, window))
    out.put(result)


async def _simulate(url, credentials, interval, start_at, window) -> dict:
    host, port = url.split("//", 1)[1].split(":")
    port = int(port)
    probes: list[float] = []
    overshoot: list[float] = []
    errors = 0
    stop = asyncio.Event()

    async def runner(credential: str, offset: float) -> None:
        nonlocal errors
        wire = Wire(host, port, credential)
        await asyncio.sleep(max(0.0, start_at - time.time()) + offset)
        try:
            await wire.post(CHECK_IN, {"free_slots": 1, "readings": READINGS,
                                       "version": __version__, "capabilities": CAPABILITIES})
        except (OSError, asyncio.IncompleteReadError, IndexError, ValueError):
            errors += 1
        while not stop.is_set():
            sent = time.time()
            try:
                status = await wire.post(CLAIM, {"free_slots": 1, "wait": interval,
                                                 "readings": READINGS})
                if window[0] <= sent <= window[1] and status == 204:
                    overshoot.append(max(0.0, time.time() - sent - interval) * 1000)
            except (OSError, asyncio.IncompleteReadError, IndexError, ValueError):
                errors += 1
                await asyncio.sleep(1.0)
        wire.close()

    async def probe() -> None:
        nonlocal errors
        wire = Wire(host, port)
        window_from, window_to = window[0], window[1]
        while time.time() < window_to:
            await asyncio.sleep(random.expovariate(PROBES_PER_SECOND))
            sent = time.perf_counter()
            at = time.time()
            try:
                status = await wire.post(CLAIM, {"free_slots": 1, "wait": 0,
                                                 "readings": READINGS},
                                         token=random.choice(credentials))
                if window_from <= at <= window_to and status in (200, 204):
                    probes.append((time.perf_counter() - sent) * 1000)
            except (OSError, asyncio.IncompleteReadError, IndexError, ValueError):
                errors += 1
        wire.close()

    tasks = [asyncio.create_task(runner(c, interval * i / max(1, len(credentials))))
             for i, c in enumerate(credentials)]
    while window[0] > time.time() + 0.2:  # the bench sets the window once all are parked
        await asyncio.sleep(0.2)
    await asyncio.sleep(max(0.0, window[0] - time.time()))
    cpu_from = resource.getrusage(resource.RUSAGE_SELF)
    await probe()
    cpu_to = resource.getrusage(resource.RUSAGE_SELF)
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    cpu = (cpu_to.ru_utime + cpu_to.ru_stime) - (cpu_from.ru_utime + cpu_from.ru_stime)
    return {"probes": probes, "overshoot": overshoot, "errors": errors, "cpu_s": cpu}


class _Servers:
    """Every replica's process, read as one (CPU times and RSS summed)."""

    def __init__(self, pids: list[int]):
        self.procs = [psutil.Process(pid) for pid in pids]

    def cpu_times(self):
        times = [p.cpu_times() for p in self.procs]
        return type("Times", (), {"user": sum(t.user for t in times),
                                  "system": sum(t.system for t in times)})

    def memory_info(self):
        return type("Memory", (), {"rss": sum(p.memory_info().rss for p in self.procs)})


def run(runners: int, procs: int, window: float, interval: float = 15.0,
        database: str | None = None, replicas: int = 1, noise: bool = False) -> dict:
    from common import Bench

    with tempfile.TemporaryDirectory(prefix="gg-bench-checkins-") as tmp:
        bench = Bench(Path(tmp), env={"GG_CHECK_IN_INTERVAL": str(interval), "GG_CLAIM_WAIT": "30",
                                      "GG_OFFLINE_AFTER": str(3 * interval)},
                      database=database, replicas=replicas).start()
        made: Noise | None = None
        try:
            proc = _Servers([server.proc.pid for server in bench.servers])
            started = time.monotonic()
            credentials = asyncio.run(register(bench.url, bench.token, runners))
            took = time.monotonic() - started
            print(f"{runners} runners registered in {took:.0f}s", file=sys.stderr)
            time.sleep(1.0)
            empty_rss = proc.memory_info().rss
            start_at = time.time() + 2.0
            spawn = multiprocessing.get_context("spawn")
            shared = spawn.Array("d", [float("inf"), float("inf")])  # the window, set below
            out = spawn.Queue()
            workers = [spawn.Process(
                target=simulate, args=(bench.url_of(i), credentials[i::procs], interval, start_at,
                                       shared, out)) for i in range(procs)]
            for w in workers:
                w.start()
            urls = [server.url for server in bench.servers]
            made = Noise(bench.url, bench.token, on=noise).start()  # from the fleet's start
            # The first check-ins come in one interval; the window starts once every runner
            # checked in and parked a claim (the wave absorbed), one interval on at the least,
            # so that it measures the steady rhythm; how long the wave took is a figure too.
            wave = _parked_all(urls, runners, start_at, interval)
            window_from = max(time.time(), start_at + interval) + 2.0
            window_to = window_from + window
            shared[0], shared[1] = window_from, window_to
            time.sleep(max(0.0, window_from - time.time()))
            load_at_start = os.getloadavg()[0]
            cpu_before, t_before = proc.cpu_times(), time.monotonic()
            lag_before = lag_reading(urls)
            # read once before the loop: a server too starved to answer /metrics at once may
            # leave the window no turn of it
            rss_max, parked, scraped_at = proc.memory_info().rss, 0.0, 0.0
            while time.time() < window_to:
                rss_max = max(rss_max, proc.memory_info().rss)
                if time.monotonic() - scraped_at >= 5.0:  # inside the window: read after it,
                    scraped_at = time.monotonic()     # the simulators are already leaving
                    parked = max(parked, sum(scrape(server.url).get("gg_claims_parked", 0.0)
                                             for server in bench.servers))
                time.sleep(1.0)
            cpu_after, t_after = proc.cpu_times(), time.monotonic()
            lag_after = lag_reading(urls)
            lag = loop_lag.between(lag_before[0], lag_after[0])
            pauses = loop_lag.between(lag_before[1], lag_after[1])
            made.stop()
            parts = [out.get(timeout=interval * 4 + 120) for _ in workers]
            for w in workers:
                w.join(timeout=60)
            busy = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
            probes = [ms for p in parts for ms in p["probes"]]
            over = [ms for p in parts for ms in p["overshoot"]]
            return {
                "runners": runners, "procs": procs, "interval": interval, "window": window,
                "registered_in_s": round(took, 1),
                "wave_s": wave,
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "load_at_start": round(load_at_start, 2),
                "loop_lag": loop_lag.figures(lag), "gc_pauses": loop_lag.figures(pauses),
                "noise": made.report,
                "check_in_ms": summary(probes, 1), "repark_overshoot_ms": summary(over, 1),
                "errors": sum(p["errors"] for p in parts),
                "heartbeats_per_s": round(runners / interval, 1),
                "server_cpu_percent": round(100 * busy / (t_after - t_before), 1),
                "simulator_cpu_percent": round(100 * sum(p["cpu_s"] for p in parts) / window, 1),
                "server_rss_mb": round(rss_max / 2**20, 1),
                "empty_rss_mb": round(empty_rss / 2**20, 1),
                "parked_claims": int(parked),
                "kb_per_parked_claim": round((rss_max - empty_rss) / 1024 / parked, 1)
                if parked else None,
                "store": store_label(database, replicas),
            }
        finally:
            if made is not None:
                made.stop()
            bench.stop()


def _parked_all(urls: list[str], runners: int, start_at: float, interval: float) -> float | None:
    """Seconds from the first check-in until 99 % of the runners hold a parked claim (read
    from ``/metrics`` each second), or None when that did not happen within 20 intervals."""
    deadline = start_at + 20 * interval
    while time.time() < deadline:
        parked = sum(scrape(url).get("gg_claims_parked", 0.0) for url in urls)
        if parked >= 0.99 * runners and time.time() >= start_at + interval:
            return round(time.time() - start_at, 1)
        time.sleep(1.0)
    return None


def _wave(seconds: float | None) -> str:
    if seconds is None:
        return "they never all did within 20 intervals; measured from then"
    return f"the first check-ins' wave absorbed {seconds:g} s after it began"


def gc_cell(pauses: dict | None) -> str:
    if not pauses or not pauses["n"]:
        return "none"
    return lag_cell(pauses)


def lag_cell(lag: dict | None) -> str:
    if not lag or not lag["n"]:
        return "– (`/metrics` not answered within 120 s)"
    return (f"{loop_lag.shown(lag['p50_ms'])} / {loop_lag.shown(lag['p99_ms'])} / "
            f"{loop_lag.shown(lag['max_ms'])} (mean {lag['mean_ms']}, n = {lag['n']}, "
            f"{lag.get('later_than_target')} later than 20 ms)")


def markdown(r: dict) -> str:
    c, o = r["check_in_ms"], r["repark_overshoot_ms"]
    return "\n".join([
        f"{r.get('store', 'SQLite, 1 server')}: "
        f"{r['runners']:,} simulated runners in {r['procs']} simulator processes, each holding "
        f"one parked claim that carries its readings and re-parks every {r['interval']:g} s "
        f"(≈ {r['heartbeats_per_s']:g} heartbeats/s); {r['window']:g} s measured once every "
        f"runner held a parked claim ({_wave(r.get('wave_s'))}); load average at the window's "
        f"start {r.get('load_at_start', '–')}, "
        f"at the end {r['load_average']}. Targets: 10,000 "
        "runners, check-in p99 ≤ 100 ms, server ≤ 1 core, RSS ≤ 300 MB, ≤ 20 KB a parked claim; "
        "under noise check-in p99 ≤ 100 ms, max ≤ 1 s, zero errors, event-loop lag p99 ≤ 20 ms."
        f" {describe(r.get('noise', {}))}\n",
        "| figure | value |", "|---|---|",
        f"| check-in (heartbeat claim, wait 0) p50 / p99 / max ms | {c['p50']} / {c['p99']} / "
        f"{c['max']} (n = {c['n']}) |",
        f"| parked claim answered later than its wait (0 within it), p50 / p99 / max ms | "
        f"{o['p50']} / {o['p99']} / {o['max']} (n = {o['n']}) |",
        f"| event-loop lag p50 / p99 / max ms (`gg_event_loop_lag_seconds` over the window, "
        f"bucket bounds) | {lag_cell(r.get('loop_lag'))} |",
        f"| the garbage collector's walks of every object (`gg_gc_pause_seconds`, generation 2, "
        f"over the window): p50 / p99 / max ms, bucket bounds | {gc_cell(r.get('gc_pauses'))} |",
        f"| server CPU, % of one core | {r['server_cpu_percent']} |",
        f"| simulators' CPU, % of one core (all processes) | {r['simulator_cpu_percent']} |",
        f"| server RSS, MB (registered fleet, none parked) | {r['server_rss_mb']} "
        f"({r['empty_rss_mb']}) |",
        f"| parked claims / KB each | {r['parked_claims']:,} / {r['kb_per_parked_claim']} |",
        f"| errors | {r['errors']} |",
        f"\nRegistering the {r['runners']:,} runners (32 at a time, each proving its key) took "
        f"{r['registered_in_s']:g} s.",
    ])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 runners, a 20 s window")
    ap.add_argument("--runners", type=int, default=None)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--window", type=float, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    noise_option(ap)
    ap.add_argument("--section", default=None, metavar="NAME",
                    help="the section of docs/performance.md to write (default: the bench's "
                         "own, with -noise after it under --noise)")
    store_options(ap)
    args = ap.parse_args(argv)
    check_store_options(args)
    runners = args.runners or (1000 if args.quick else 10_000)
    window = args.window or (20.0 if args.quick else 60.0)
    result = run(runners, args.procs, window, database=args.database, replicas=args.replicas,
                 noise=args.noise)
    text = markdown(result)
    name = "checkins" if not args.database else f"checkins-postgresql-{args.replicas}"
    publish(args.section or name + ("-noise" if args.noise else ""), text, result, args)
    return result


if __name__ == "__main__":
    main()
