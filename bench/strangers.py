"""Strangers against a real control plane: how long `/v1/health` and a calm runner's check-in
take while each attack of the attack round runs, on a quiet machine and with noise.

Each attack gets a fresh ``gg server`` on SQLite (loopback, a temporary folder):

- ``upgrades``: 2,000 WebSocket upgrades to ``/v1/consoles/x/person`` nobody finishes;
- ``slow-bodies``: 2,000 POSTs that send their headers and 10 body bytes, then hold;
- ``kept-alive``: 19,000 sockets from four addresses that ask once and stay open;
- ``nonce-flood``: anonymous ``POST /v1/key-nonces`` from one address as fast as it answers,
  and each refused nonce counted;
- ``verdict-storm``: six runners checking in facts nobody reported before, each needing a
  verdict that runs over its deadline, while a seventh (calm) checks in new facts too.

Health is probed by a process of its own (a fresh connection each time, from 127.0.0.1, the
attacks come from 127.0.0.2–5) during the attack, while it holds, and right after; the
figure is every probe's latency. ``--noise N`` runs each attack a second time with N
processes spinning on the CPU beside it (2 on a 2-core machine: every core busy), and the
load average is printed with each figure. The target (issues "Flights never run as root"
and "What is approved is what runs"): health under 1 s throughout, a calm check-in under 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpx  # noqa: E402
from common import TABLE_HEAD, publish, row, summary  # noqa: E402

from gg import keys  # noqa: E402
from gg.launch import LocalServer, free_port  # noqa: E402

# Opens COUNT sockets from SOURCE and sends PAYLOAD on each (a health request is also read
# back: its socket is then kept alive, asked and answered), prints how many, holds them until
# its input closes.
ATTACKER = r"""
import resource, socket, sys
port, count, source, payload = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
payload = payload.encode().decode("unicode_escape").encode("latin-1")
held = []
for _ in range(count):
    s = socket.socket()
    s.settimeout(10)
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    held.append(s)
    try:
        s.sendall(payload)
    except OSError:
        pass
if payload.startswith(b"GET /v1/health"):  # kept alive: each request answered before holding
    for s in held:
        try:
            s.recv(4096)
        except OSError:
            pass
print(len(held), flush=True)
sys.stdin.read()
"""

# Probes health on a fresh connection every 50 ms until its input closes; a line per probe:
# its latency (ms), its status and when it started (time.monotonic(), one clock for every
# process on the machine, so the bench can tell which phase of an attack a probe fell in).
HEALTH_WATCH = r"""
import select, sys, time, httpx
print("ready", flush=True)
while not select.select([sys.stdin], [], [], 0.05)[0]:
    started = time.monotonic()
    try:
        status = httpx.get(sys.argv[1] + "/v1/health", timeout=30).status_code
    except httpx.HTTPError:
        status = 0
    print(round((time.monotonic() - started) * 1000, 2), status, started, flush=True)
"""

SPIN = "while True: pass"

UPGRADE = ("GET /v1/consoles/x/person HTTP/1.1\\r\\nHost: gg\\r\\nUpgrade: websocket\\r\\n"
           "Connection: Upgrade\\r\\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\n"
           "Sec-WebSocket-Version: 13\\r\\n\\r\\n")
SLOW_BODY = ("POST /v1/key-nonces HTTP/1.1\\r\\nHost: gg\\r\\nContent-Type: application/json\\r\\n"
             "Content-Length: 100000\\r\\n\\r\\n{\\\"purpose\\\"")
KEEP_ALIVE = "GET /v1/health HTTP/1.1\\r\\nHost: gg\\r\\n\\r\\n"
STRANGERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
# A meaning within the static cost bound that takes seconds on a runner reporting 8,000 tools.
WIDE = ('tools.all(t, size(t) < 100 && !t.startsWith("-") && !t.endsWith("~") && '
        '!t.contains("//") && t != "x" && t.matches("^[a-z0-9-]+$"))')


class Watch:
    """Health probed from a process of its own until :meth:`stop`; the latencies (ms)."""

    def __init__(self, url: str):
        self.proc = subprocess.Popen([sys.executable, "-c", HEALTH_WATCH, url],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"  # probing before the attack starts

    def stop(self) -> tuple[list[tuple[float, float]], int]:
        """Every probe as (started, latency in ms), and how many failed."""
        out, _ = self.proc.communicate(input="x", timeout=120)
        samples = [line.split() for line in out.splitlines() if line.strip()]
        failed = sum(1 for _, status, _ in samples if status != "200")
        return [(float(at), float(ms)) for ms, _, at in samples], failed


def _server(root: Path, name: str, env: dict[str, str] | None = None,
            file_limit: int = 1024) -> LocalServer:
    root.mkdir(parents=True, exist_ok=True)
    return LocalServer(root / name, free_port(), env=env or {}, log=root / f"{name}.log",
                       file_limit=file_limit).start(timeout=120)


def _sockets(server: LocalServer, payload: str, count: int, sources: tuple[str, ...],
             hold: float = 2.0) -> tuple[int, tuple[float, float]]:
    """Attackers open ``count`` sockets between them and hold them ``hold`` seconds: how many
    opened, and the held window (monotonic start and end: every socket open and asked, and a
    kept-alive one answered)."""
    per = count // len(sources)
    procs = [subprocess.Popen([sys.executable, "-c", ATTACKER, str(server.port), str(per), s,
                               payload], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for s in sources]
    opened = sum(int(p.stdout.readline() or 0) for p in procs)
    held_from = time.monotonic()
    time.sleep(hold)  # a benchmark's hold: health keeps being probed meanwhile
    held_to = time.monotonic()
    for p in procs:
        p.stdin.close()
    for p in procs:
        p.wait(timeout=60)
    return opened, (held_from, held_to)


def _nonce_flood(server: LocalServer, count: int = 2000) -> int:
    """Anonymous key nonces from one address; then a real registration from it. Refused
    (429) nonces counted."""
    refused = 0
    public = keys.public_text(keys.generate())
    transport = httpx.HTTPTransport(local_address=STRANGERS[0])
    with httpx.Client(base_url=server.url, transport=transport, timeout=30) as http:
        for _ in range(count):
            answer = http.post("/v1/key-nonces", json={"purpose": "register", "public_key": public})
            refused += answer.status_code == 429
    return refused


def _verdict_storm(server: LocalServer, calm_checks: int = 5) -> list[float]:
    """Six runners check in 8,000 never-seen tools each, six times; a calm runner checks in
    new facts meanwhile. The calm check-ins' latencies (ms)."""
    owner = {"authorization": f"Bearer {server.owner_token()}"}
    http = httpx.Client(base_url=server.url, timeout=120)
    env = http.post("/v1/environments", headers=owner, json={"name": "storm", "means": WIDE})
    http.post(f"/v1/gates/{env.json()['gate']}/clear", headers=owner)

    def register(name: str) -> dict:
        key = keys.generate()
        nonce = http.post("/v1/key-nonces", json={"purpose": "register",
                                                  "public_key": keys.public_text(key)})
        answer = http.post("/v1/runners", headers=owner, json={
            "name": name, **keys.prove(key, "register", nonce.json()["nonce"]),
            "labels": {"environment": "storm"}})
        return {"authorization": f"Bearer {answer.json()['credential']}"}

    names = [f"storm-{n}" for n in range(6)]
    stormers = {name: register(name) for name in names}
    calm = register("calm")
    stop = threading.Event()

    def storm(name: str) -> None:
        with httpx.Client(base_url=server.url, timeout=120, headers=stormers[name]) as client:
            for k in range(6):
                if stop.is_set():
                    return
                body = json.dumps({"capabilities": {"tools": [
                    f"{name}-{k}-tool-{n:06d}" for n in range(8000)]}})
                client.post("/v1/runner/check-in", content=body,
                            headers={"content-type": "application/json"})

    threads = [threading.Thread(target=storm, args=(n,), daemon=True) for n in names]
    for t in threads:
        t.start()
    time.sleep(2.0)  # the storm under way
    latencies = []
    with httpx.Client(base_url=server.url, timeout=120, headers=calm) as client:
        for n in range(calm_checks):
            started = time.monotonic()
            client.post("/v1/runner/check-in", json={"capabilities": {"tools": ["git",
                                                                                f"calm-{n}"]}})
            latencies.append((time.monotonic() - started) * 1000)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    http.close()
    return latencies


ATTACKS = ("upgrades", "slow-bodies", "kept-alive", "nonce-flood", "verdict-storm")


def run_attack(root: Path, name: str) -> dict:
    """One attack against a fresh server; health's latencies throughout, and its own figure.
    For the socket attacks, health is also given for the held window alone (every socket
    open and asked, none arriving): ``kept-alive``'s target is health under 1 s while 19,000
    sockets stay open, and its arrival is 19,000 requests answered, a flood of its own."""
    env, limit = {}, 1024
    if name == "kept-alive":
        env, limit = {"GG_KEEP_ALIVE_TIMEOUT": "60"}, 20_000
    if name == "verdict-storm":
        env = {"GG_CLAIM_WAIT": "0.2"}
    server = _server(root, name, env, limit)
    held = None
    try:
        watch = Watch(server.url)
        extra: dict = {}
        if name == "upgrades":
            extra["opened"], held = _sockets(server, UPGRADE, 2000, STRANGERS[:1] * 4)
        elif name == "slow-bodies":
            extra["opened"], held = _sockets(server, SLOW_BODY, 2000, STRANGERS[:1] * 4)
        elif name == "kept-alive":
            extra["opened"], held = _sockets(server, KEEP_ALIVE, 19_000, STRANGERS, hold=10.0)
        elif name == "nonce-flood":
            extra["refused"] = _nonce_flood(server)
        else:
            extra["calm_check_in"] = summary(_verdict_storm(server))
        time.sleep(1.0)  # right after: health still probed
        probes, failed = watch.stop()
    finally:
        server.stop()
    if held is not None:
        extra["health_held"] = summary([ms for at, ms in probes if held[0] <= at <= held[1]])
    return {"health": summary([ms for _, ms in probes]), "failed": failed,
            "load": round(os.getloadavg()[0], 2), **extra}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--noise", type=int, default=2,
                    help="processes spinning on the CPU in the second round (0: no second round)")
    ap.add_argument("--only", choices=ATTACKS, action="append", default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.noise < 0:
        raise SystemExit("--noise takes a number of processes, 0 or more")
    result: dict = {}
    rounds = [0] + ([args.noise] if args.noise else [])
    with tempfile.TemporaryDirectory(prefix="gg-bench-strangers-") as tmp:
        for noise in rounds:
            spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(noise)]
            try:
                for name in args.only or ATTACKS:
                    figure = run_attack(Path(tmp) / f"noise{noise}", name)
                    result[f"{name} (noise {noise})"] = figure
                    print(f"{name}, noise {noise}: health {figure['health']} failed "
                          f"{figure['failed']} load {figure['load']} "
                          f"{ {k: v for k, v in figure.items() if k not in ('health', 'failed', 'load')} }",
                          flush=True)
            finally:
                for s in spinners:
                    s.kill()
                    s.wait()
    lines = [TABLE_HEAD]
    for label, figure in result.items():
        lines.append(row(f"{label}: health (load {figure['load']}, {figure['failed']} failed)",
                         figure["health"]))
        if "health_held" in figure:
            lines.append(row(f"{label}: health while every socket is open and none arrives",
                             figure["health_held"]))
        if "calm_check_in" in figure:
            lines.append(row(f"{label}: a calm runner's check-in with new facts",
                             figure["calm_check_in"]))
    text = ("Health probed every 50 ms on a fresh connection from its own process, during each "
            "attack, while it holds and right after (and, for the socket attacks, the probes of "
            "the held window alone); a calm runner's check-in during the verdict "
            "storm. Target: under 1,000 ms throughout. `noise N`: N processes spinning on the "
            "CPU beside the server; the load average is read at the end of each attack.\n\n"
            + "\n".join(lines))
    publish("strangers", text, result, args, noise=(
        f"no noise in the rows of `noise 0`; noise ran in those of `noise {args.noise}` "
        f"({args.noise} processes spinning beside the server)" if args.noise else
        "no noise (`--noise 0`: nothing else started by the benchmark)"))
    return result


if __name__ == "__main__":
    main()
