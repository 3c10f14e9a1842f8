#!/usr/bin/env python3
"""Check-in capacity: thousands of simulated runners at the real 15 s interval.

    python bench/checkins.py [--quick] [--steps 1000,2500,5000,10000] [--window S] [--json]

Each simulated runner speaks the real protocol over loopback from one asyncio process:
registered through ``POST /v1/runners`` with its own Ed25519 key (concurrently), then it
checks in every CHECK_IN_INTERVAL (15 s, spread evenly) and keeps one claim parked on the
long-poll (re-parked when CLAIM_WAIT answers "nothing for you"). At each step the fleet
grows to the step's size, runs one interval so every runner is in its rhythm, and is then
measured for ``--window`` seconds:

- check-in latency as the simulated runner sees it (p50/p99), and as the server counts it
  (``gg_http_request_seconds`` for the check-in route, from ``/metrics``, p99 as a bucket
  bound);
- server CPU (share of one core) and RSS (psutil on the server's pid);
- parked claims (``gg_claims_parked``) and RSS per parked claim over the server holding
  the registered fleet but no connection.

All runners are registered first (concurrently, through the real API), so that a step
measures the check-ins of its own size and not the registrations of the next.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import psutil  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from common import Bench, emit, summary, write_section  # noqa: E402

from gg import __version__, keys  # noqa: E402

CHECK_IN = "/v1/runner/check-in"
CHECK_IN_CONNECTIONS = 512
READINGS = {"cpu_percent": 3.5, "memory_percent": 41.0, "load": [0.2, 0.3, 0.4]}


def _key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(os.urandom(32))


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
        out[name] = float(value)
    return out


def check_in_buckets(metrics: dict[str, float]) -> dict[float, float]:
    prefix = f'gg_http_request_seconds_bucket{{le="'
    found = {}
    for key, value in metrics.items():
        if key.startswith(prefix) and f'route="{CHECK_IN}"' in key:
            le = key[len(prefix):].split('"', 1)[0]
            found[float("inf") if le == "+Inf" else float(le)] = value
    return found


def bucket_quantile(before: dict, after: dict, q: float) -> float | None:
    deltas = sorted((le, after.get(le, 0) - before.get(le, 0)) for le in after)
    total = deltas[-1][1] if deltas else 0
    if not total:
        return None
    for le, count in deltas:
        if count >= q * total:
            return le * 1000
    return None


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


class Fleet:
    def __init__(self, url: str, token: str, interval: float, claim_wait: float):
        self.url, self.token, self.interval, self.claim_wait = url, token, interval, claim_wait
        self.host, self.port = url.split("//", 1)[1].split(":")
        self.port = int(self.port)
        self.credentials: list[str] = []
        self.samples: list[tuple[float, float, int]] = []  # (sent at, ms, status)
        self.errors = 0
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.wires: list[Wire] = []
        self.active = 0
        # Check-ins are short: they share a pool of connections, so that ten thousand
        # runners fit in the file-descriptor limit (20,000 here) of both processes while
        # each parked claim keeps a connection of its own, as a real runner's does.
        self.check_in_wires: asyncio.Queue[Wire] = asyncio.Queue()
        for _ in range(CHECK_IN_CONNECTIONS):
            wire = Wire(self.host, self.port)
            self.wires.append(wire)
            self.check_in_wires.put_nowait(wire)

    async def register(self, count: int) -> float:
        """Register ``count`` runners over the real API, 32 at a time (none checks in yet)."""
        started = time.monotonic()
        sem = asyncio.Semaphore(32)
        async with httpx.AsyncClient(base_url=self.url, timeout=120) as http:
            async def one(i: int) -> str:
                key = _key()
                body = {"name": f"sim-{i}", "workers": 1, "version": __version__}
                async with sem:
                    for attempt in range(6):  # the same key again just supersedes: safe to retry
                        try:
                            # the key is proved afresh for every attempt (a nonce is single-use)
                            n = await http.post("/v1/key-nonces", json={
                                "purpose": "register", "public_key": keys.public_text(key)})
                            n.raise_for_status()
                            proof = keys.prove(key, "register", n.json()["nonce"])
                            r = await http.post("/v1/runners", json={**body, **proof},
                                                headers={"authorization": f"Bearer {self.token}"})
                            r.raise_for_status()
                            return r.json()["credential"]
                        except httpx.TransportError:
                            if attempt == 5:
                                raise
                            await asyncio.sleep(0.5 * (attempt + 1))
                raise AssertionError("unreachable")
            self.credentials = list(await asyncio.gather(*(one(i) for i in range(count))))
        return time.monotonic() - started

    def activate(self, count: int) -> None:
        """Bring runners up to ``count``: each new one checks in on its own beat and parks."""
        loop = asyncio.get_running_loop()
        fresh = self.credentials[self.active:count]
        for n, credential in enumerate(fresh):
            offset = self.interval * n / max(1, len(fresh))
            self.tasks.append(loop.create_task(self._live(credential, offset)))
            self.tasks.append(loop.create_task(self._park(credential, offset)))
        self.active = max(self.active, count)

    async def _live(self, credential: str, offset: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(offset)
        due = loop.time()
        while not self.stop.is_set():
            sent = loop.time()
            wire = await self.check_in_wires.get()
            try:
                status = await wire.post(CHECK_IN, {"free_slots": 1, "readings": READINGS,
                                                    "version": __version__}, token=credential)
                self.samples.append((time.monotonic(), (loop.time() - sent) * 1000, status))
            except (OSError, asyncio.IncompleteReadError, IndexError, ValueError):
                self.errors += 1
            finally:
                self.check_in_wires.put_nowait(wire)
            due += self.interval
            await asyncio.sleep(max(0.0, due - loop.time()))

    async def _park(self, credential: str, offset: float) -> None:
        wire = Wire(self.host, self.port, credential)
        self.wires.append(wire)
        await asyncio.sleep(offset + 0.5)
        while not self.stop.is_set():
            try:
                await wire.post("/v1/runner/claim", {"free_slots": 1, "wait": self.claim_wait})
            except (OSError, asyncio.IncompleteReadError, IndexError, ValueError):
                self.errors += 1
                await asyncio.sleep(1.0)

    async def close(self) -> None:
        self.stop.set()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for wire in self.wires:
            wire.close()


async def measure(bench: Bench, steps: list[int], window: float, interval: float,
                  claim_wait: float) -> list[dict]:
    proc = psutil.Process(bench.server.proc.pid)
    fleet = Fleet(bench.url, bench.token, interval, claim_wait)
    results = []
    took = await fleet.register(max(steps))
    print(f"{max(steps)} runners registered in {took:.0f}s", file=sys.stderr)
    scrape(bench.url)
    await asyncio.sleep(1.0)
    empty_rss = proc.memory_info().rss
    try:
        for step in steps:
            fleet.activate(step)
            print(f"{step} runners checking in; settling one interval", file=sys.stderr)
            await asyncio.sleep(interval + 1)
            before_metrics = await asyncio.to_thread(scrape, bench.url)
            cpu_before, t_before = proc.cpu_times(), time.monotonic()
            rss_max = 0
            window_start = time.monotonic()
            while time.monotonic() - window_start < window:
                rss_max = max(rss_max, proc.memory_info().rss)
                await asyncio.sleep(1.0)
            cpu_after, t_after = proc.cpu_times(), time.monotonic()
            after_metrics = await asyncio.to_thread(scrape, bench.url)
            seen = [ms for at, ms, status in fleet.samples if window_start <= at <= t_after]
            failed = sum(1 for at, _, status in fleet.samples
                         if window_start <= at <= t_after and status != 200)
            busy = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
            parked = after_metrics.get("gg_claims_parked")
            before_b, after_b = check_in_buckets(before_metrics), check_in_buckets(after_metrics)
            result = {
                "runners": step, "registered_in_s": round(took, 1), "registered": max(steps),
                "check_in_ms": summary(seen, 1), "check_ins_per_s": round(len(seen) / window, 1),
                "failed": failed, "errors": fleet.errors,
                "server_p50_ms_bucket": bucket_quantile(before_b, after_b, 0.50),
                "server_p99_ms_bucket": bucket_quantile(before_b, after_b, 0.99),
                "server_cpu_percent": round(100 * busy / (t_after - t_before), 1),
                "server_rss_mb": round(rss_max / 2**20, 1),
                "parked_claims": None if parked is None else int(parked),
                "kb_per_parked_claim": round((rss_max - empty_rss) / 1024 / parked, 1) if parked else None,
            }
            results.append(result)
            print(result, file=sys.stderr)
    finally:
        await fleet.close()
    return results


def run(steps: list[int], window: float) -> dict:
    interval, claim_wait = 15.0, 30.0
    with tempfile.TemporaryDirectory(prefix="gg-bench-checkins-") as tmp:
        bench = Bench(Path(tmp), env={"GG_CHECK_IN_INTERVAL": "15", "GG_CLAIM_WAIT": "30",
                                      "GG_OFFLINE_AFTER": "45"}).start()
        try:
            steps_out = asyncio.run(measure(bench, steps, window, interval, claim_wait))
        finally:
            bench.stop()
    return {"interval": interval, "window": window, "steps": steps_out}


def markdown(r: dict) -> str:
    lines = [f"Check-in capacity: simulated runners checking in every {r['interval']:g} s, each "
             f"also holding one parked claim; {r['window']:g} s measured per step after one "
             "settling interval (targets: 10,000 runners with check-in p99 ≤ 100 ms on 2 cores; "
             "10,000 parked claims under 400 MB RSS).\n",
             "| runners | check-ins/s | check-in median ms (client) | p99 ms (client) | max ms | "
             "p99 ms (server, bucket bound) | failed | server CPU % of one core | server RSS MB | "
             "parked claims | KB per parked claim |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in r["steps"]:
        c = s["check_in_ms"]
        parked = "–" if s["parked_claims"] is None else f"{s['parked_claims']:,}"
        lines.append(
            f"| {s['runners']:,} | {s['check_ins_per_s']:g} | {c['p50']} | {c['p99']} | {c['max']} | "
            f"{s['server_p99_ms_bucket']} | {s['failed'] + s['errors']} | {s['server_cpu_percent']} | "
            f"{s['server_rss_mb']} | {parked} | "
            f"{s['kb_per_parked_claim']} |")
    first = r["steps"][0] if r["steps"] else None
    if first:
        lines.append(f"\nAll {first['registered']:,} runners were registered first, through "
                     f"`POST /v1/runners`, 32 at a time: {first['registered_in_s']:g} s. Each step "
                     "then brings that many of them to life.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="steps 250,500 and a 15 s window")
    ap.add_argument("--steps", default=None)
    ap.add_argument("--window", type=float, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    steps = [int(x) for x in (args.steps or ("250,500" if args.quick else "1000,2500,5000,10000")).split(",")]
    window = args.window or (15.0 if args.quick else 30.0)
    result = run(steps, window)
    text = markdown(result)
    print(text, file=sys.stderr if args.json else sys.stdout)
    if not args.no_write:
        write_section("checkins", text)
    emit(result, args.json)
    return result


if __name__ == "__main__":
    main()
