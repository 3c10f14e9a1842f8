"""A store that has run for months: landed flights copied until the store holds ``count``
of them, with their grants, facts and events.

A bench flies a few flights first (``warm-up``); :func:`fill` copies what those left in the
store, each row as many times as it takes, under new flight ids (``<id>-h<n>``), in one
statement a table. A server that has run for months holds hundreds of thousands of landed
flights beside the few it is flying: this is the store a hot path must stay flat on.

PostgreSQL is analysed afterwards, as its autovacuum would have done by the time such a
history had been made; SQLite is left as gg leaves it (gg runs no ``ANALYZE`` there).
"""

from __future__ import annotations

import time

# the tables a landed flight leaves rows in, and the column naming the flight in each
TABLES = (("flights", "id"), ("grants", "flight_id"), ("facts", "flight_id"),
          ("events", "flight_id"))


def fill(db, count: int) -> dict:
    """Copies of the landed flights in ``db`` until it holds at least ``count`` landed
    flights; what was added to each table and the seconds it took. Call it inside a write
    transaction (``core.run``)."""
    started = time.perf_counter()
    landed = db.one("SELECT count(*) FROM flights WHERE stage = 'landed'")[0]
    if landed == 0:
        raise ValueError("no landed flight to copy: fly some first")
    copies = -(-(count - landed) // landed)  # each landed flight this many times more
    added: dict[str, int] = {}
    if copies <= 0:
        return {"copies": 0, "added": added, "landed": landed, "seconds": 0.0}
    for table, key in TABLES:
        columns = [c for c in _columns(db, table) if c != "seq"]  # seq: the store numbers it
        named = ", ".join(f'"{c}"' for c in columns)
        chosen = ", ".join(f't."{c}" || \'-h\' || n.i' if c == key else f't."{c}"'
                           for c in columns)
        originals = "SELECT id FROM flights WHERE stage = 'landed' AND id NOT LIKE '%-h%'"
        before = db.one(f"SELECT count(*) FROM {table}")[0]
        db.run(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            f"INSERT INTO {table} ({named}) SELECT {chosen} FROM {table} AS t, n "
            f"WHERE t.{key} IN ({originals})" + (" ORDER BY n.i, t.seq" if table != "grants" else ""),
            (copies,))
        added[table] = db.one(f"SELECT count(*) FROM {table}")[0] - before
    return {"copies": copies, "added": added, "landed": landed * (copies + 1),
            "seconds": round(time.perf_counter() - started, 1)}


def analyse(db) -> None:
    """PostgreSQL's statistics brought up to date (outside a transaction), as its autovacuum
    would; nothing on SQLite."""
    if db.dialect == "postgresql":
        db.run("ANALYZE")


def _columns(db, table: str) -> list[str]:
    if db.dialect == "postgresql":
        return [r[0] for r in db.all(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "AND table_schema = current_schema() ORDER BY ordinal_position", (table,))]
    return [r[1] for r in db.all(f"PRAGMA table_info({table})")]
