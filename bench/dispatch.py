#!/usr/bin/env python3
"""Dispatch latency: a flight accepted → a parked runner holds its lease.

    python bench/dispatch.py [--quick] [--flights N] [--json] [--no-write]
                             [--database postgresql://… [--replicas N]]

One flight at a time (command ``true``), always onto an idle runner whose claim is parked:

- **server**: the flight's ``opened_at`` → its ``info:flight:claimed`` event (a real
  ``gg runner up`` parked on the long-poll); both stamped by the control plane's clock.
- **client, claim**: ``POST /v1/flights`` answered → the parked claim's answer received, by
  a runner simulated in this process over the real protocol (one clock for both ends;
  ``gg_claims_parked`` on ``/metrics`` confirms the claim is parked before each flight).
- **end to end**: ``POST /v1/flights`` sent → the real runner's ``started`` fact seen by
  the client (long-poll on the flight's facts), and → ``landed`` seen.

With ``--database`` the store is PostgreSQL (a fresh database); with ``--replicas N`` (N ≥ 2)
the dispatch crosses replicas: the runner (real or simulated) is parked on the last replica
and every flight is opened, and followed, on the first, so each figure includes the wake-up
between them (NOTIFY on commit, heard by the other replica's LISTEN connection).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from common import (  # noqa: E402
    TABLE_HEAD,
    Bench,
    check_store_options,
    proved,
    publish,
    row,
    store_label,
    store_options,
    summary,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402


def _auth(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


def parked(http: httpx.Client) -> int:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("gg_claims_parked "):
            return int(float(line.split()[1]))
    return 0


def wait_parked(http: httpx.Client, n: int = 1, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while parked(http) < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the runner's claim did not park")
        time.sleep(0.002)


def follow_until(http: httpx.Client, flight_id: str, token: str, want_started: bool) -> float:
    """Long-poll the flight's facts; the client time when it started (or ended)."""
    after = 0
    while True:
        answer = http.get(f"/v1/flights/{flight_id}/facts", headers=_auth(token),
                          params={"after": after, "wait": 20}, timeout=40).json()
        now = time.time()
        if want_started and any(f["kind"] == "started" for f in answer["facts"]):
            return now
        if answer["stage"] in ("landed", "failed", "cancelled"):
            return now
        if answer["facts"]:
            after = answer["facts"][-1]["seq"]


def real_runner(bench: Bench, flights: int) -> dict:
    """Sequential flights onto one real ``gg runner up``."""
    token = bench.token
    with httpx.Client(base_url=bench.url, timeout=30) as http, \
            httpx.Client(base_url=bench.url_of(-1), timeout=30) as parking:
        server, started, landed, ids = [], [], [], []
        for i in range(flights + 5):  # the first five warm up
            wait_parked(parking)
            sent = time.time()
            flight = http.post("/v1/flights", json={"command": ["true"]}, headers=_auth(token)).json()
            t_started = follow_until(http, flight["id"], token, want_started=True)
            t_landed = follow_until(http, flight["id"], token, want_started=False)
            if i >= 5:
                ids.append(flight["id"])
                started.append((t_started - sent) * 1000)
                landed.append((t_landed - sent) * 1000)
        for flight_id in ids:
            shown = http.get(f"/v1/flights/{flight_id}", headers=_auth(token)).json()
            claimed = http.get("/v1/events", headers=_auth(token),
                               params={"flight": flight_id, "kind": "info:flight:claimed"}).json()
            server.append((claimed[0]["at"] - shown["opened_at"]) * 1000)
    return {"server_ms": summary(server, 2), "started_ms": summary(started),
            "landed_ms": summary(landed)}


def simulated_runner(bench: Bench, flights: int) -> dict:
    """Sequential flights onto a runner simulated here: POST answered → claim answered."""
    token = bench.token
    parking = httpx.Client(base_url=bench.url_of(-1), timeout=60)  # where the claim parks
    with httpx.Client(base_url=bench.url, timeout=60) as http, parking:
        # Only this runner may take these flights: the real one is stopped first.
        reg = http.post("/v1/runners", headers=_auth(token),
                        json={"name": "simulated",
                              **proved(http, "register", Ed25519PrivateKey.generate())}).json()
        credential = reg["credential"]
        http.post("/v1/runner/check-in", json={"free_slots": 1}, headers=_auth(credential))
        got: dict[str, float] = {}
        done = threading.Event()

        def claimer() -> None:
            with httpx.Client(base_url=bench.url_of(-1), timeout=60) as own:
                last_check_in = time.monotonic()
                while not done.is_set():
                    if time.monotonic() - last_check_in > 10:
                        own.post("/v1/runner/check-in", json={"free_slots": 1}, headers=_auth(credential))
                        last_check_in = time.monotonic()
                    answer = own.post("/v1/runner/claim", json={"free_slots": 1, "wait": 5},
                                      headers=_auth(credential))
                    if answer.status_code != 200:
                        continue
                    now = time.time()
                    body = answer.json()
                    flight_id, epoch = body["flight"]["id"], body["lease"]["epoch"]
                    got[flight_id] = now
                    own.post(f"/v1/runner/flights/{flight_id}/hand-back", headers=_auth(credential),
                             json={"epoch": epoch, "outcome": "landed", "exit_code": 0,
                                   "key": f"{epoch}:hand-back"})

        thread = threading.Thread(target=claimer, daemon=True)
        thread.start()
        samples, from_sent = [], []
        try:
            for i in range(flights + 5):
                wait_parked(parking)
                sent = time.time()
                flight = http.post("/v1/flights", json={"command": ["true"]}, headers=_auth(token))
                accepted = time.time()
                flight_id = flight.json()["id"]
                deadline = time.monotonic() + 10
                while flight_id not in got and time.monotonic() < deadline:
                    time.sleep(0.0005)
                if i >= 5:
                    samples.append((got[flight_id] - accepted) * 1000)
                    from_sent.append((got[flight_id] - sent) * 1000)
                while parked(parking) < 1 and time.monotonic() < deadline:
                    time.sleep(0.001)
        finally:
            done.set()
        return {"client_claim_ms": summary(samples, 2), "client_sent_claim_ms": summary(from_sent, 2)}


def run(flights: int, database: str | None = None, replicas: int = 1) -> dict:
    load = round(os.getloadavg()[0], 2)  # the machine may be shared: say how busy it was
    with tempfile.TemporaryDirectory(prefix="gg-bench-dispatch-") as tmp:
        bench = Bench(Path(tmp), database=database, replicas=replicas).start()
        try:
            bench.runner("real", server=bench.url_of(-1))  # parked on the last replica
            bench.wait_online(1)
            result = real_runner(bench, flights)
            bench.runners[0].stop()
            result.update(simulated_runner(bench, flights))
        finally:
            bench.stop()
    result["flights"] = flights
    result["load"] = load
    result["store"] = store_label(database, replicas)
    result["crossing"] = replicas > 1
    return result


def markdown(r: dict) -> str:
    where = ("; the runner parked on the last replica, every flight opened on the first"
             if r.get("crossing") else "")
    return "\n".join([
        f"Dispatch latency ({r.get('store', 'SQLite, 1 server')}{where}), {r['flights']} "
        "sequential flights (`true`), each onto an idle runner "
        "whose claim was parked (target, POST sent → parked claim answered: median ≤ 10 ms, "
        f"p99 ≤ 30 ms). Load average at the run's start: {r['load']:g}.\n",
        TABLE_HEAD,
        row("server: opened_at → info:flight:claimed (real `gg runner up`)", r["server_ms"]),
        row("client: POST /v1/flights answered → parked claim answered (simulated runner)",
            r["client_claim_ms"]),
        row("client: POST /v1/flights sent → parked claim answered (simulated runner)",
            r["client_sent_claim_ms"]),
        row("end to end: POST sent → `started` fact seen by the client", r["started_ms"]),
        row("end to end: POST sent → `landed` seen by the client", r["landed_ms"]),
        "",
        "A negative \"answered → claimed\" means the parked runner had its lease before the "
        "person who opened the flight had the answer to `POST /v1/flights` (the grant is "
        "committed in the same group commit as the flight, and both answers are sent after it).",
    ])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="50 flights instead of 200")
    ap.add_argument("--flights", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="do not touch docs/performance.md")
    store_options(ap)
    args = ap.parse_args(argv)
    check_store_options(args)
    flights = args.flights or (50 if args.quick else 200)
    result = run(flights, args.database, args.replicas)
    text = markdown(result)
    publish("dispatch" if not args.database else f"dispatch-postgresql-{args.replicas}",
            text, result, args)
    return result


if __name__ == "__main__":
    main()
