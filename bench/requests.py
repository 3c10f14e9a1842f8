#!/usr/bin/env python3
"""What one request costs gg's client and the server: its head and body in one send, as gg's
transport sends them, or in two, as ``http.client`` does on its own.

    python bench/requests.py [--quick] [--count N] [--rounds R] [--noise] [--json] [--no-write]

One real control plane (SQLite in a temporary directory) and, in this process, gg's client
(``gg.client.Client``: the transport of a runner, a pool maintainer and ``gg fly``) opening
flights of ``true`` one after another (``POST /v1/flights``, a body of ~100 bytes; no runner
takes them). Rounds of N opens (1,000) alternate, R times (3) each, between the transport as
it is and the same transport told to send a body apart from its head
(``gg.client.ONE_SEND_MOST`` below any body). For each way: this process's CPU a request,
the server's (user + system; under ``--noise`` it serves the noise's listings too), and the
wall time a request, the median over its rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil  # noqa: E402
from common import Bench, publish  # noqa: E402
from noise import Noise, describe, noise_option  # noqa: E402

from gg import client as client_module  # noqa: E402
from gg.client import Client  # noqa: E402

WAYS = ("one send", "two sends")
WARM_UP = 100  # opens before measuring: connections made, the server's first reads done


def _round(api: Client, server: psutil.Process, body: dict, count: int,
           figures: dict[str, list[float]]) -> None:
    """``count`` opens, one after another; their CPU and wall time a request added to
    ``figures``."""
    before, cpu, wall = server.cpu_times(), time.process_time(), time.perf_counter()
    for _ in range(count):
        api.open_flight(body)
    after = server.cpu_times()
    figures["wall_us"].append((time.perf_counter() - wall) * 1e6 / count)
    figures["client_us"].append((time.process_time() - cpu) * 1e6 / count)
    figures["server_us"].append(
        (after.user + after.system - before.user - before.system) * 1e6 / count)


def measure(count: int, rounds: int, noise: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="gg-bench-requests-") as tmp:
        bench = Bench(Path(tmp)).start()
        try:
            api = Client(bench.url, bench.token)
            server = psutil.Process(bench.server.proc.pid)
            body = {"command": ["true"], "title": "a request's cost"}
            for _ in range(WARM_UP):
                api.open_flight(body)
            taken: dict[str, dict[str, list[float]]] = {
                way: {"client_us": [], "server_us": [], "wall_us": []} for way in WAYS}
            joined = client_module.ONE_SEND_MOST
            try:
                with Noise(bench.url, bench.token, on=noise) as made:
                    for _ in range(rounds):
                        for way in WAYS:
                            client_module.ONE_SEND_MOST = joined if way == "one send" else -1
                            _round(api, server, body, count, taken[way])
            finally:
                client_module.ONE_SEND_MOST = joined
            return {"count": count, "rounds": rounds, "noise": made.report,
                    "ways": {way: {k: round(statistics.median(v), 1) for k, v in figures.items()}
                             for way, figures in taken.items()},
                    "rounds_seen": {way: {k: [round(x, 1) for x in v] for k, v in figures.items()}
                                    for way, figures in taken.items()}}
        finally:
            bench.stop()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="200 requests a round, 2 rounds")
    ap.add_argument("--count", type=int, default=1000, help="requests a round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each way")
    noise_option(ap)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.count < 1 or args.rounds < 1:
        raise SystemExit("--count and --rounds take a whole number, 1 or more")
    count, rounds = (200, 2) if args.quick else (args.count, args.rounds)
    result = measure(count, rounds, args.noise)
    lines = [f"A request's cost: {count:,} opens of a flight (`POST /v1/flights`) a round, "
             f"{rounds} rounds of each way in turn, gg's client in one process against a real "
             "control plane (SQLite); the medians of the rounds. "
             + describe(result["noise"]),
             "",
             "| head and body | this process's CPU µs a request | the server's CPU µs a request "
             "| wall µs a request | rounds (client µs) |",
             "|---|---|---|---|---|"]
    for way in WAYS:
        w, seen = result["ways"][way], result["rounds_seen"][way]
        lines.append(f"| {way} | {w['client_us']} | {w['server_us']} | {w['wall_us']} | "
                     + ", ".join(str(x) for x in seen["client_us"]) + " |")
    publish("requests" + ("-noise" if args.noise else ""), "\n".join(lines), result, args)
    return result


if __name__ == "__main__":
    main()
