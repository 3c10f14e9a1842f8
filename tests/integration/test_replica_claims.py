"""Claims racing across three real ``gg server`` replicas on one PostgreSQL database, with no
global write lock (docs/scale-out.md, "Isolation and locking"): a grant passes by a flight
another replica's writer holds, and a runner's seats are counted again under its lock.

Read after the fact from the database's ``grants`` and the audit events, never from timing.
"""

from __future__ import annotations

import psycopg

from support import wait_until

CLAIMED = "info:flight:claimed"
ENDED = ("info:flight:landed", "info:flight:failed", "info:flight:expired",
         "info:flight:returned", "info:flight:cancelled")


def most_per_runner(events: list[dict]) -> dict[str, int]:
    """runner id -> the most flights it flew at once, walking the audit events in the order
    they were recorded (a grant starts one, an end stops it)."""
    flying: dict[str, set[str]] = {}
    holder: dict[str, str] = {}
    most: dict[str, int] = {}
    for e in sorted(events, key=lambda e: e["seq"]):
        fid, rid = e.get("flight_id"), e.get("runner_id")
        if e["kind"] == CLAIMED and rid:
            holder[fid] = rid
            flying.setdefault(rid, set()).add(fid)
            most[rid] = max(most.get(rid, 0), len(flying[rid]))
        elif e["kind"] in ENDED and fid in holder:
            flying[holder.pop(fid)].discard(fid)
    return most


def test_claims_racing_on_three_replicas_grant_every_flight_exactly_once_per_epoch(
        make_replicas):
    replicas = make_replicas(3, {})
    names = [f"r{i}" for i in range(6)]
    for i, name in enumerate(names):  # two runners parked on each replica, two workers each
        replicas.runner(name, first=i % 3, only=True, workers=2)
    wait_until(lambda: set(names) <= {r["name"] for r in replicas.api(0).runners()
                                      if r["online"]}, 60, what="every runner online")
    # opened through every replica in turn while claims are parked on all three: each
    # opening wakes claims on every replica, which race for the same heads of the queue
    ids = [replicas.api(i % 3).open_flight({"command": ["true"]})["id"] for i in range(60)]
    wait_until(lambda: all(replicas.api(1).flight(f)["stage"] == "landed" for f in ids),
               timeout=180, what="every flight to land")
    with psycopg.connect(replicas.database_url) as pg:
        grants = pg.execute("SELECT flight_id, epoch, count(*) FROM grants "
                            "GROUP BY flight_id, epoch").fetchall()
        epochs = dict(pg.execute("SELECT id, epoch FROM flights").fetchall())
    assert sorted(g[0] for g in grants) == sorted(ids)  # each flight granted once, no more
    assert all(count == 1 and epoch == epochs[fid] for fid, epoch, count in grants)
    events = replicas.api(2).events(kind="info:flight:", limit=10000)
    assert sorted(e["flight_id"] for e in events if e["kind"] == CLAIMED) == sorted(ids)
    assert max(most_per_runner(events).values()) <= 2  # never more than a runner's workers
