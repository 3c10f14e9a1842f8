"""How long `gg flights` takes on a saturated fleet: 10,000 ready flights, 1,000 runners.

    PYTHONPATH=. python bench/placement.py [--flights 10000] [--runners 1000] [--repeat 7] [--groups]

Starts a real ``gg server`` on loopback with its SQLite file in a temporary folder, fills
its store through the control layer (runners registered and checked in without a capability
report, so degraded and offered nothing, each sent one flight, then the ready flights; the
listing benches fill it with ``busy``, see :func:`fill`), and times:

- ``GET /v1/flights?limit=10000`` over HTTP, body read as bytes (what `gg flights` waits for);
- the same listing computed in-process by ``gg.control.flights.list_flights`` on the same
  store (the server-side work: load, explain every waiting flight, build the rows);
- ``why_waiting`` alone, for every ready flight, over one ``Snapshot``.

The fleet is varied so the waiting sentences are too: 10 environments (one with nobody
advertising it), runners cordoned, offline, degraded and reserved among them, 20 people
opening flights, and some flights sent to one runner.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gg import keys
from gg.control import flights, key_proof, leases, people, runners
from gg.control.core import Core
from gg.domain import tokens
from gg.domain.flight_spec import FlightSpec, required_labels
from gg.domain.flights import Flight
from gg.domain.runners import HealthState
from gg.launch import LocalServer, free_port
from gg.settings import Settings
from gg.store import open_store
from gg.store.estimates import FLIGHT

ENVIRONMENTS = [f"env{i}" for i in range(10)]
LONG_LEASE = 1e9  # seconds: a busy fill's leases never run out while a bench reads them


def proof(core) -> dict:
    """A fresh key, proved for a registration through the control layer."""
    key = Ed25519PrivateKey.generate()
    nonce = key_proof.issue(core, "register", keys.public_text(key))["nonce"]
    return keys.prove(key, "register", nonce)


GROUPS = ("default", "dc1", "dc2", "lab")


def place_in_groups(core: Core, owner: dict, made: list) -> None:
    """Groups in play: three sites, dc2 bound to env2, the lab exclusive; the runners spread
    over them and the default group in turn."""
    from gg.control import groups

    groups.set_attribute(core, owner, "site", ["dc1", "dc2", "dc3"])
    groups.set_group(core, owner, "dc1", attributes={"site": "dc1"})
    groups.set_group(core, owner, "dc2", attributes={"site": "dc2"}, bindings=["env2"])
    groups.set_group(core, owner, "lab", attributes={"site": "dc3"}, exclusive=True)
    with core.store.atomic():
        for i, r in enumerate(made):
            core.store.update_runner(r.id, group=GROUPS[i % len(GROUPS)])


def placement_of(rng: random.Random, env: str) -> dict:
    """A fifth of the flights name a group (one the binding allows), a fifth select a site."""
    roll = rng.random()
    if roll < 0.2:
        return {"group": "dc2" if env == "env2" else rng.choice(GROUPS)}
    if roll < 0.4:
        return {"where": {"site": rng.choice(("dc1", "dc2", "dc3"))}}
    return {}


def fill(data_dir: Path, n_runners: int, n_flights: int, seed: int = 1,
         with_groups: bool = False, busy: bool = False) -> None:
    """Register the runners, saturate them, and open the ready flights.

    ``busy``: the runners are healthy, so each really flies the flight sent to it (on a
    lease that outlives any bench) and the queue waits on runners that will free up, not
    on their health; a history of durations is added for every kind the queue holds, so
    the waiting flights get a start estimate. Without it, a runner has no capability
    report (degraded), so nothing flies and no waiting flight has an estimate.
    """
    rng = random.Random(seed)
    core = Core(store=open_store(data_dir),
                settings=Settings(lease_ttl=LONG_LEASE) if busy else Settings())
    owner = core.store.person_by_name("owner")
    folks = [owner] + [people.add_person(core, owner, f"p{i}", admin=False)[0] for i in range(19)]
    made = []
    for i in range(n_runners):
        env = ENVIRONMENTS[i % 9]  # env9: nobody advertises it
        r, _ = runners.register(core, owner, name=f"r{i}", **proof(core),
                                labels={"environment": env, "zone": f"z{i % 3}"}, workers=1,
                                inventory={"os": "Linux", "cpu_count": 8}, version=None)
        made.append(r)
    for r in made:
        runners.check_in(core, r, readings={}, inventory=None, capabilities=None, version=None,
                         held=[], peer_address=None)
    if busy:  # a capability report in hand: what keeps them from flying is their leases
        with core.store.atomic():
            core.store.db.run("UPDATE runners SET health = ?", (HealthState.OK.value,))
    # Saturate: every runner holds one live lease, so no ready flight is offerable.
    for r in made:
        flights.open_flight(core, owner, FlightSpec(command=["sleep", "1"], runner=r.id))
        leases.try_claim(core, r.id)
    with core.store.atomic():
        for r in made[:40]:
            core.store.update_runner(r.id, admin_state="cordoned")
        for r in made[40:60]:
            core.store.update_runner(r.id, health="degraded: bwrap is missing")
        for r in made[60:80]:
            core.store.update_runner(r.id, ownership="claimed", owner=folks[1].id, reserved=True)
    if with_groups:
        place_in_groups(core, owner, made)
    now = core.now()
    with core.store.atomic():
        for i in range(n_flights):
            env = rng.choice(ENVIRONMENTS)
            target = made[rng.randrange(len(made))].id if rng.random() < 0.02 else None
            opener = rng.choice(folks)
            core.store.insert_flight(Flight(
                id=tokens.new_id("f_"), command=["make", "test", str(i)], opened_by=opener.id,
                opened_at=now + i * 1e-6, title=f"make test {i}", environment=env,
                requires=required_labels(env), runner_target=target,
                **(placement_of(rng, env) if with_groups else {})))
    if busy:
        add_history(core, rng)
    core.store.close()


def add_history(core: Core, rng: random.Random) -> None:
    """Durations of finished flights for every kind the fill opens: its ready flights
    (titled ``make test N``: each borrows its environment's durations) and the flights the
    runners fly."""
    now = core.now()
    with core.store.atomic():
        for env in ENVIRONMENTS:
            for _ in range(30):
                core.store.add_duration(FLIGHT, ("make test", env, "shell"),
                                        rng.lognormvariate(4, 0.5), window=200, keep=2000,
                                        now=now)
        for _ in range(30):
            core.store.add_duration(FLIGHT, ("sleep 1", "", "shell"), rng.uniform(50, 150),
                                    window=200, keep=2000, now=now)


def keep_online(data_dir: Path) -> None:
    core = Core(store=open_store(data_dir), settings=Settings())
    with core.store.atomic():
        core.store.db.run("UPDATE runners SET last_seen_at = ?", (time.time(),))
    core.store.close()


def timed(fn, repeat: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU milliseconds of each run (CPU time is what the work itself costs
    when other processes compete for the cores; wall time is what a user waits)."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return wall, cpu


def summary(label: str, ms: list[float], cpu: list[float] | None = None) -> str:
    line = f"{label:<46} wall median {statistics.median(ms):7.1f} ms, min {min(ms):7.1f} ms"
    if cpu is not None:
        line += f"   cpu median {statistics.median(cpu):6.1f} ms, min {min(cpu):6.1f} ms"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flights", type=int, default=10_000)
    parser.add_argument("--runners", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--groups", action="store_true",
                        help="runner groups in play (sites, a binding, an exclusive group)")
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="gg-bench-placement-"))
    server = LocalServer(root / "data", free_port(), log=root / "server.log",
                         env={"GG_OFFLINE_AFTER": "3600", "GG_LEASE_TTL": "3600"})
    server.start()
    try:
        started = time.perf_counter()
        fill(root / "data", args.runners, args.flights, with_groups=args.groups)
        print(f"filled {args.runners} runners and {args.flights} ready flights in "
              f"{time.perf_counter() - started:.1f}s ({root})", file=sys.stderr)
        keep_online(root / "data")
        token = server.owner_token()
        http = httpx.Client(base_url=server.url, timeout=120,
                            headers={"authorization": f"Bearer {token}"})

        def over_http() -> list[bytes]:  # every page, following the cursors
            bodies, cursor = [], None
            while True:
                params = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
                r = http.get("/v1/flights", params=params)
                r.raise_for_status()
                bodies.append(r.content)
                cursor = r.json()["next_cursor"]
                if cursor is None:
                    return bodies

        bodies = over_http()
        body = b"".join(bodies)
        rows = [row for b in bodies for row in httpx.Response(200, content=b).json()["items"]]
        sentences = {}
        for row in rows:
            sentences[row["waiting"]] = sentences.get(row["waiting"], 0) + 1
        http_ms, _ = timed(over_http, args.repeat)

        core = Core(store=open_store(root / "data"),
                    settings=Settings(offline_after=3600, lease_ttl=3600))

        def serve() -> bytes:  # what the route does: the use case, then the JSON body
            page = flights.list_flights(core, limit=1000)
            out = [json.dumps(page, separators=(",", ":")).encode()]
            while page["next_cursor"]:
                page = flights.list_flights(core, limit=1000, cursor=page["next_cursor"])
                out.append(json.dumps(page, separators=(",", ":")).encode())
            return b"".join(out)

        serve_ms, serve_cpu = timed(serve, args.repeat)
        ready = core.store.flight_values(stages=("ready",), limit=10_000)

        def explain_all() -> None:
            snap = flights.Snapshot(core, core.now())
            for values in ready:
                snap.waiting_of(values)

        why_ms, why_cpu = timed(explain_all, args.repeat)
        print(f"{len(rows)} ready flights listed ({len(body) / 1e6:.1f} MB of JSON), "
              f"{len(sentences)} distinct waiting sentences:")
        for sentence, count in sorted(sentences.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  {count:6d}  {sentence}")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(summary("GET /v1/flights, every page of 1000 (HTTP, bytes)", http_ms))
        print(summary("server-side: list_flights + JSON body", serve_ms, serve_cpu))
        print(summary("why_waiting for every ready flight", why_ms, why_cpu))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
