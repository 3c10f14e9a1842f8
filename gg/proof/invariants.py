"""The lease protocol's promises, proved from what the store kept.

The chaos suite (``tests/chaos``) kills, stalls and restarts real processes and then hands
the store to :func:`check`, which reads it through plain SQL on a **read-only** connection
and reports every broken promise:

=========================  ===============================================================
invariant                  what must hold
=========================  ===============================================================
one_holder_per_epoch       every (flight, epoch) was granted to one runner only: one
                           ``info:flight:claimed`` event per (flight, epoch), naming the
                           runner of its ``grants`` row, and every fact a runner reported
                           at epoch e came from the holder of epoch e
epochs_increase            a flight's grants carry epochs 1, 2, …, n without a gap, granted
                           in that order; the row's ``epoch`` is n and ``attempt`` is n
one_final_outcome          a final flight has exactly one final event (landed, failed or
                           cancelled, matching its stage), a flight that is not final has
                           none; at most one accepted ``exit`` fact per *attempt* (epoch);
                           every exit but a flight's last says it was retried (a failure
                           with a retry left, ``gg fly --retries``), a retried exit is a
                           failure, and the flight's outcome is its last attempt's: a
                           landed flight's last exit is ``landed`` at its last epoch, a
                           failed one's is ``failed`` at its last epoch unless the retry
                           it started then ended otherwise (its lease lost), a flight
                           that is not final or was cancelled has only retried exits
nothing_lost               every opened flight has a row, and is final, gated, ready, or
                           flying on a live lease (``lease_expires_at`` after ``now``
                           minus a grace for expiries nobody has looked at yet)
no_stale_reports           no fact of epoch e from a runner was stored after epoch e+1 was
                           granted, after the control plane's own ``expired`` fact of
                           epoch e, after the hand-back of epoch e, or after the flight
                           ended
no_expiry_after_restart    no ``info:flight:expired`` within LEASE_TTL of a restart for a
                           lease granted before the restart and live when the old process
                           died
attempts_never_overlap     epoch e+1 was granted only after epoch e had ended by its
                           holder's ``returned`` hand-back (the acknowledged stop, also of
                           a retired runner), its holder's retried ``exit`` (a failure with
                           a retry left) or by the control plane's ``expired`` fact
                           recorded at or after the lease's expiry (the clock), never by
                           fiat (as retiring a runner once did)
each_episode_once          what is recorded once per episode was recorded once, however
                           many replicas looked: one ``info:flight:opened`` per flight, one
                           ``info:flight:expired`` per (flight, epoch), one
                           ``warn:runner:aged_out`` per (runner, last check-in), one
                           ``warn:runner:version_skew`` per (runner, version pair), one
                           ``warn:pool:stale`` per (pool, last attestation)
=========================  ===============================================================

Retention prunes history (docs/operations.md): an ended flight goes with its grants, facts
and events, so nothing points at it any more; but events also have a window of their own, and
a final flight kept longer than its events has lost its ``claimed`` and final events. The
store notes the latest such cut in ``meta`` (:data:`EVENTS_PRUNED_BEFORE`); a flight opened
before it is *trimmed*, and the invariants that read its events
(:data:`READS_EVENTS`) are not asked of it: pruned history is not broken history.

The checker knows nothing of gg's code: it reads the tables ``flights``, ``grants``,
``facts`` and ``events`` (see ``gg/store/migrations.py``). Every query is plain SQL over
those columns; the one dialect-specific piece is reading a number out of a JSON ``body``
column, :data:`JSON_NUMBER` (SQLite's ``json_extract``; for PostgreSQL use
``CAST(body::json->>'epoch' AS INTEGER)``), so a PostgreSQL store can be checked by
passing its DB-API connection and ``dialect="postgresql"`` to :func:`check_connection`, or
its URL to :func:`check_postgresql` (one read-only REPEATABLE READ snapshot).
"""

from __future__ import annotations

import sqlite3
import time
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Iterable, Sequence

from gg.store.retention import EVENTS_PRUNED_BEFORE

FINAL = ("landed", "failed", "cancelled")
READS_EVENTS = ("one_holder_per_epoch", "epochs_increase", "one_final_outcome")
FINAL_EVENTS = ("info:flight:landed", "info:flight:failed", "info:flight:cancelled")
JSON_NUMBER = {
    "sqlite": "CAST(json_extract({col}, '$.{key}') AS INTEGER)",
    "postgresql": "CAST(({col})::json->>'{key}' AS INTEGER)",
}
JSON_REAL = {
    "sqlite": "CAST(json_extract({col}, '$.{key}') AS REAL)",
    "postgresql": "CAST(({col})::json->>'{key}' AS DOUBLE PRECISION)",
}
JSON_TEXT = {
    "sqlite": "CAST(json_extract({col}, '$.{key}') AS TEXT)",
    "postgresql": "(({col})::json->>'{key}')",
}
# Events recorded once per episode, and what names the episode besides the kind: columns of
# ``events``, or (key, dialects) for a value read from its JSON body.
EPISODES = (
    ("info:flight:opened", ("e.flight_id",)),
    ("info:flight:expired", ("e.flight_id", ("epoch", JSON_NUMBER))),
    ("warn:runner:aged_out", ("e.runner_id", ("last_seen_at", JSON_REAL))),
    ("warn:runner:version_skew", ("e.runner_id", ("pair", JSON_TEXT))),
    ("warn:pool:stale", (("pool", JSON_TEXT), ("last_attested_at", JSON_REAL))),
)


@dataclass(frozen=True)
class Restart:
    """One control-plane restart, in wall-clock seconds (the clock the server stamps with).

    ``down_at``: the old process was killed; ``up_at``: the new process was started (it
    had not yet opened the store, so anything it decided is stamped at or after it).
    """

    down_at: float
    up_at: float


@dataclass(frozen=True)
class Violation:
    invariant: str
    flight_id: str | None
    detail: str

    def __str__(self) -> str:
        where = f" [{self.flight_id}]" if self.flight_id else ""
        return f"{self.invariant}{where}: {self.detail}"


@dataclass
class Report:
    counts: dict[str, int] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def broken(self, invariant: str) -> list[Violation]:
        return [v for v in self.violations if v.invariant == invariant]

    def summary(self, limit: int = 40) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        if self.ok:
            return f"every invariant holds ({counts})"
        lines = [f"{len(self.violations)} violation(s) ({counts}):"]
        lines += [f"  {v}" for v in self.violations[:limit]]
        if len(self.violations) > limit:
            lines.append(f"  … and {len(self.violations) - limit} more")
        return "\n".join(lines)


def open_read_only(path: Path | str) -> sqlite3.Connection:
    """A connection that cannot write, even by mistake (the server stays the only writer)."""
    uri = f"file:{Path(path).resolve()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=10.0)
    conn.execute("PRAGMA query_only = ON")
    return conn


def check(db_path: Path | str, *, lease_ttl: float, restarts: Sequence[Restart] = (),
          now: float | None = None, stuck_grace: float = 0.0) -> Report:
    """Check every invariant against the SQLite store at ``db_path``, or the PostgreSQL
    store at that ``postgresql://`` URL (read in one read-only REPEATABLE READ snapshot)."""
    if isinstance(db_path, str) and db_path.startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(db_path) as pg:
            pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                return check_connection(pg, lease_ttl=lease_ttl, restarts=restarts, now=now,
                                        stuck_grace=stuck_grace, dialect="postgresql")
            finally:
                pg.rollback()
    conn = open_read_only(db_path)
    try:
        return check_connection(conn, lease_ttl=lease_ttl, restarts=restarts, now=now,
                                stuck_grace=stuck_grace)
    finally:
        conn.close()


def check_postgresql(url: str, *, lease_ttl: float, restarts: Sequence[Restart] = (),
                     now: float | None = None, stuck_grace: float = 0.0) -> Report:
    """Check every invariant against the PostgreSQL store at ``url``, in one read-only
    REPEATABLE READ transaction (one snapshot of every table, as the SQLite check reads)."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        try:
            return check_connection(conn, lease_ttl=lease_ttl, restarts=restarts, now=now,
                                    stuck_grace=stuck_grace, dialect="postgresql")
        finally:
            conn.rollback()


def check_connection(conn, *, lease_ttl: float, restarts: Sequence[Restart] = (),
                     now: float | None = None, stuck_grace: float = 0.0,
                     dialect: str = "sqlite") -> Report:
    """Check a DB-API connection to a gg store (one consistent read of every table)."""
    now = time.time() if now is None else now
    q = _Queries(dialect)
    report = Report()
    cur = conn.cursor()
    if dialect == "sqlite":
        cur.execute("BEGIN")  # one snapshot for every query below
    try:
        for table in ("flights", "grants", "facts", "events"):
            cur.execute(f"SELECT count(*) FROM {table}")
            report.counts[table] = cur.fetchone()[0]
        trimmed = _trimmed(cur)
        for name, checker in _CHECKS:
            for flight_id, detail in checker(cur, q, now=now, lease_ttl=lease_ttl,
                                             restarts=restarts, stuck_grace=stuck_grace):
                if name in READS_EVENTS and flight_id in trimmed:
                    continue
                report.violations.append(Violation(name, flight_id, detail))
    finally:
        if dialect == "sqlite":
            cur.execute("ROLLBACK")
    return report


class _Queries:
    def __init__(self, dialect: str):
        self.dialect = dialect
        self.epoch = JSON_NUMBER[dialect].format(col="e.body", key="epoch")
        self.expired_at = JSON_REAL[dialect].format(col="x.body", key="expired_at")


def _trimmed(cur) -> set[str]:
    """Flights opened before the latest cut of the events' own window (their early events
    may be gone)."""
    cur.execute(f"SELECT value FROM meta WHERE key = '{EVENTS_PRUNED_BEFORE}'")
    row = cur.fetchone()
    if row is None:
        return set()
    cur.execute("SELECT id FROM flights WHERE opened_at < %s" % float(row[0]))
    return {r[0] for r in cur.fetchall()}


def _rows(cur, sql: str) -> list[tuple]:
    cur.execute(sql)
    return cur.fetchall()


# -- the invariants ----------------------------------------------------------------------


def _one_holder_per_epoch(cur, q: _Queries, **_) -> Iterable[tuple[str | None, str]]:
    for flight_id, epoch, n, runners in _rows(cur, f"""
            SELECT e.flight_id, {q.epoch}, count(*), count(DISTINCT e.runner_id)
              FROM events e WHERE e.kind = 'info:flight:claimed'
             GROUP BY e.flight_id, {q.epoch} HAVING count(*) > 1"""):
        yield flight_id, f"epoch {epoch} was claimed {n} times by {runners} runner(s)"
    for flight_id, epoch, claimed_by, granted_to in _rows(cur, f"""
            SELECT e.flight_id, {q.epoch}, e.runner_id, g.runner_id
              FROM events e LEFT JOIN grants g
                ON g.flight_id = e.flight_id AND g.epoch = {q.epoch}
             WHERE e.kind = 'info:flight:claimed'
               AND (g.runner_id IS NULL OR g.runner_id <> e.runner_id)"""):
        yield flight_id, (f"epoch {epoch} claimed by {claimed_by} but granted to "
                          f"{granted_to or 'nobody'}")
    for flight_id, epoch, granted_to in _rows(cur, f"""
            SELECT g.flight_id, g.epoch, g.runner_id FROM grants g
             WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.kind = 'info:flight:claimed'
                                  AND e.flight_id = g.flight_id AND {q.epoch} = g.epoch)"""):
        yield flight_id, f"epoch {epoch} granted to {granted_to} without a claimed event"
    for flight_id, epoch, reporter, holder, kind in _rows(cur, """
            SELECT f.flight_id, f.epoch, f.runner_id, g.runner_id, f.kind
              FROM facts f LEFT JOIN grants g ON g.flight_id = f.flight_id AND g.epoch = f.epoch
             WHERE f.runner_id IS NOT NULL
               AND (g.runner_id IS NULL OR g.runner_id <> f.runner_id)"""):
        yield flight_id, (f"a {kind} fact of epoch {epoch} came from {reporter}, but that "
                          f"epoch belongs to {holder or 'nobody'}")
    for flight_id, epoch, holder, granted_to in _rows(cur, """
            SELECT fl.id, fl.epoch, fl.lease_runner, g.runner_id
              FROM flights fl LEFT JOIN grants g ON g.flight_id = fl.id AND g.epoch = fl.epoch
             WHERE fl.stage = 'flying'
               AND (g.runner_id IS NULL OR g.runner_id <> fl.lease_runner)"""):
        yield flight_id, (f"flying on {holder} at epoch {epoch}, which was granted to "
                          f"{granted_to or 'nobody'}")


def _epochs_increase(cur, q: _Queries, **_) -> Iterable[tuple[str | None, str]]:
    grants: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for flight_id, epoch, granted_at in _rows(
            cur, "SELECT flight_id, epoch, granted_at FROM grants ORDER BY flight_id, epoch"):
        grants[flight_id].append((epoch, granted_at))
    for flight_id, rows in grants.items():
        epochs = [e for e, _ in rows]
        if epochs != list(range(1, len(rows) + 1)):
            yield flight_id, f"granted epochs {epochs} are not 1..{len(rows)}"
        times = [t for _, t in rows]
        if any(b <= a for a, b in pairwise(times)):
            yield flight_id, f"epochs were not granted in order (granted_at {times})"
    for flight_id, epoch, attempt in _rows(cur, "SELECT id, epoch, attempt FROM flights"):
        rows = grants.get(flight_id, [])
        top = rows[-1][0] if rows else 0
        if epoch != top or attempt != len(rows):
            yield flight_id, (f"the flight says epoch {epoch}, attempt {attempt}; its grants "
                              f"say epoch {top}, {len(rows)} attempt(s)")
    claimed: dict[str, list[int]] = defaultdict(list)
    for flight_id, epoch in _rows(cur, f"""
            SELECT e.flight_id, {q.epoch} FROM events e
             WHERE e.kind = 'info:flight:claimed' ORDER BY e.seq"""):
        claimed[flight_id].append(epoch)
    for flight_id, seq in claimed.items():
        if any(b <= a for a, b in pairwise(seq)):
            yield flight_id, f"claimed events carry epochs {seq}, not strictly increasing"


def _one_final_outcome(cur, q: _Queries, **_) -> Iterable[tuple[str | None, str]]:
    kinds = ", ".join(f"'{k}'" for k in FINAL_EVENTS)
    finals: dict[str, list[str]] = defaultdict(list)
    for flight_id, kind in _rows(cur, f"SELECT flight_id, kind FROM events WHERE kind IN ({kinds}) "
                                      "ORDER BY seq"):
        finals[flight_id].append(kind.rsplit(":", 1)[1])
    exits: dict[str, list[tuple[int, str | None, bool]]] = defaultdict(list)
    for flight_id, epoch, body in _rows(cur, "SELECT flight_id, epoch, body FROM facts "
                                             "WHERE kind = 'exit' ORDER BY seq"):
        exits[flight_id].append((epoch, *_exit(body)))
    for flight_id, stage, epoch, outcome in _rows(
            cur, "SELECT id, stage, epoch, outcome FROM flights"):
        ended = finals.get(flight_id, [])
        if stage in FINAL:
            if ended != [stage]:
                yield flight_id, f"{stage}, but its final events are {ended or 'none'}"
            if outcome != stage:
                yield flight_id, f"{stage}, but its outcome reads {outcome!r}"
        elif ended:
            yield flight_id, f"{stage}, yet final event(s) {ended} were recorded"
        accepted = exits.get(flight_id, [])
        epochs = [e for e, _, _ in accepted]
        if len(set(epochs)) != len(epochs):
            yield flight_id, f"more than one exit fact was accepted for one attempt: {accepted}"
        if any(retried and how != "failed" for _, how, retried in accepted):
            yield flight_id, f"an exit that is not a failure was retried: {accepted}"
        if any(not retried for _, _, retried in accepted[:-1]):
            yield flight_id, f"an exit before its last was not retried: {accepted}"
        last = accepted[-1] if accepted else None
        if stage == "landed" and last != (epoch, "landed", False):
            yield flight_id, f"landed at epoch {epoch}, but its exit facts are {accepted}"
        if stage == "failed" and last is not None and not last[2] \
                and last != (epoch, "failed", False):
            yield flight_id, f"failed at epoch {epoch}, but its exit facts are {accepted}"
        if stage in ("cancelled", "ready", "gated", "flying") and last is not None \
                and not last[2]:
            yield flight_id, f"{stage}, but a final exit fact was accepted: {accepted}"


def _nothing_lost(cur, q: _Queries, *, now: float, stuck_grace: float, **_):
    for (flight_id,) in _rows(cur, """
            SELECT DISTINCT e.flight_id FROM events e
             WHERE e.kind = 'info:flight:opened'
               AND NOT EXISTS (SELECT 1 FROM flights f WHERE f.id = e.flight_id)"""):
        yield flight_id, "opened, but the flight's row is gone"
    for table in ("grants", "facts"):
        for (flight_id,) in _rows(cur, f"""
                SELECT DISTINCT t.flight_id FROM {table} t
                 WHERE NOT EXISTS (SELECT 1 FROM flights f WHERE f.id = t.flight_id)"""):
            yield flight_id, f"{table} rows for a flight that does not exist"
    for flight_id, stage, expires_at in _rows(
            cur, "SELECT id, stage, lease_expires_at FROM flights WHERE stage NOT IN "
                 "('landed', 'failed', 'cancelled', 'gated', 'ready')"):
        if stage != "flying":
            yield flight_id, f"in an unknown stage {stage!r}"
        elif expires_at is None:
            yield flight_id, "flying without a lease expiry"
        elif expires_at + stuck_grace <= now:
            yield flight_id, (f"flying on a lease that ran out {now - expires_at:.1f}s ago "
                              "and was never recorded as expired")


def _no_stale_reports(cur, q: _Queries, **_) -> Iterable[tuple[str | None, str]]:
    for flight_id, epoch, kind, at, next_at in _rows(cur, """
            SELECT f.flight_id, f.epoch, f.kind, f.at, g.granted_at
              FROM facts f JOIN grants g ON g.flight_id = f.flight_id AND g.epoch = f.epoch + 1
             WHERE f.runner_id IS NOT NULL AND f.at >= g.granted_at"""):
        yield flight_id, (f"a {kind} fact of epoch {epoch} was stored "
                          f"{at - next_at:.3f}s after epoch {epoch + 1} was granted")
    for flight_id, epoch, kind in _rows(cur, """
            SELECT f.flight_id, f.epoch, f.kind
              FROM facts f JOIN facts x ON x.flight_id = f.flight_id AND x.epoch = f.epoch
             WHERE f.runner_id IS NOT NULL AND x.runner_id IS NULL AND x.kind = 'expired'
               AND f.seq > x.seq"""):
        yield flight_id, f"a {kind} fact of epoch {epoch} was stored after that lease expired"
    for flight_id, epoch, kind, end in _rows(cur, """
            SELECT f.flight_id, f.epoch, f.kind, x.kind
              FROM facts f JOIN facts x ON x.flight_id = f.flight_id AND x.epoch = f.epoch
             WHERE f.runner_id IS NOT NULL AND x.runner_id IS NOT NULL
               AND x.kind IN ('exit', 'returned') AND f.seq > x.seq"""):
        yield flight_id, f"a {kind} fact of epoch {epoch} was stored after its {end} hand-back"
    for flight_id, kind, at, ended_at in _rows(cur, """
            SELECT f.flight_id, f.kind, f.at, fl.ended_at
              FROM facts f JOIN flights fl ON fl.id = f.flight_id
             WHERE f.runner_id IS NOT NULL AND fl.ended_at IS NOT NULL AND f.at > fl.ended_at"""):
        yield flight_id, f"a {kind} fact was stored {at - ended_at:.3f}s after the flight ended"


def _no_expiry_after_restart(cur, q: _Queries, *, lease_ttl: float,
                             restarts: Sequence[Restart], **_):
    if not restarts:
        return
    rows = _rows(cur, f"""
            SELECT e.flight_id, e.at, {q.epoch}, g.granted_at, {q.expired_at}
              FROM events e
              JOIN grants g ON g.flight_id = e.flight_id AND g.epoch = {q.epoch}
              LEFT JOIN facts x ON x.flight_id = e.flight_id AND x.epoch = g.epoch
                               AND x.kind = 'expired' AND x.runner_id IS NULL
             WHERE e.kind = 'info:flight:expired' ORDER BY e.seq""")
    for flight_id, at, epoch, granted_at, expired_at in rows:
        for r in restarts:
            live_at_kill = expired_at is None or expired_at > r.down_at
            if granted_at < r.down_at and r.up_at <= at < r.up_at + lease_ttl and live_at_kill:
                yield flight_id, (f"the lease of epoch {epoch} (granted before the restart at "
                                  f"{r.up_at:.3f}) expired {at - r.up_at:.2f}s after it, within "
                                  f"one LEASE_TTL ({lease_ttl:g}s)")


def _attempts_never_overlap(cur, q: _Queries, **_) -> Iterable[tuple[str | None, str]]:
    for flight_id, epoch, holder in _rows(cur, f"""
            SELECT g.flight_id, g.epoch, p.runner_id
              FROM grants g JOIN grants p ON p.flight_id = g.flight_id AND p.epoch = g.epoch - 1
             WHERE NOT EXISTS (
                   SELECT 1 FROM facts x
                    WHERE x.flight_id = g.flight_id AND x.epoch = p.epoch
                      AND x.at <= g.granted_at
                      AND ((x.kind IN ('returned', 'exit') AND x.runner_id = p.runner_id)
                           OR (x.kind = 'expired' AND x.runner_id IS NULL
                               AND x.at >= {q.expired_at})))"""):
        yield flight_id, (f"epoch {epoch} was granted before epoch {epoch - 1} ended: "
                          f"{holder} neither handed it back nor let its lease expire")


def _each_episode_once(cur, q: _Queries, **_) -> Iterable[tuple[str | None, str]]:
    for kind, parts in EPISODES:
        names = [p if isinstance(p, str) else p[1][q.dialect].format(col="e.body", key=p[0])
                 for p in parts]
        shown = [p if isinstance(p, str) else p[0] for p in parts]
        for row in _rows(cur, f"""
                SELECT {", ".join(names)}, count(*) FROM events e
                 WHERE e.kind = '{kind}'
                 GROUP BY {", ".join(names)} HAVING count(*) > 1"""):
            flight_id = row[0] if parts[0] == "e.flight_id" else None
            # the row's last column, the count, has no name shown
            episode = ", ".join(f"{n.removeprefix('e.')} {v}"
                                for n, v in zip(shown, row, strict=False))
            yield flight_id, f"{kind} was recorded {row[-1]} times for one episode ({episode})"


def _exit(body) -> tuple[str | None, bool]:
    """An exit fact's outcome, and whether it was retried (its body names the retry)."""
    import json

    try:
        data = json.loads(body)
        return data.get("outcome"), bool(data.get("retry"))
    except (TypeError, ValueError, AttributeError):
        return None, False


_CHECKS = (
    ("one_holder_per_epoch", _one_holder_per_epoch),
    ("epochs_increase", _epochs_increase),
    ("one_final_outcome", _one_final_outcome),
    ("nothing_lost", _nothing_lost),
    ("no_stale_reports", _no_stale_reports),
    ("no_expiry_after_restart", _no_expiry_after_restart),
    ("attempts_never_overlap", _attempts_never_overlap),
    ("each_episode_once", _each_episode_once),
)


def main(argv: list[str] | None = None) -> int:
    """``python -m gg.proof.invariants DB --lease-ttl 60 [--restart DOWN:UP ...]``"""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m gg.proof.invariants",
                                 description="Check the lease protocol's invariants in a gg store.")
    ap.add_argument("db", help="the store's SQLite file (DATA_DIR/gg.sqlite3) or PostgreSQL URL")
    ap.add_argument("--lease-ttl", type=float, default=60.0)
    ap.add_argument("--restart", action="append", default=[], metavar="DOWN:UP",
                    help="a restart: wall-clock seconds the old process died and the new started")
    ap.add_argument("--grace", type=float, default=0.0,
                    help="seconds a run-out lease may wait to be noticed (default 0)")
    args = ap.parse_args(argv)
    restarts = [Restart(*map(float, r.split(":", 1))) for r in args.restart]
    report = check(args.db, lease_ttl=args.lease_ttl, restarts=restarts, stuck_grace=args.grace)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
