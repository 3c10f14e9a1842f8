"""Pruning ended history, and the store's size. Each method is one statement over an index.

A flight is pruned with every row that hangs off it (facts, grants, its events), children
first, so a crash between batches leaves an old final flight with part of its history, which
the next batch finishes; never a row that points at nothing. Only final flights qualify: the
stage test is in every statement, not only in the caller.
"""

from __future__ import annotations

import os

from gg.domain.flights import Stage
from gg.store.db import Database

FINAL = tuple(s.value for s in Stage if s.final)
_FINAL_MARKS = ", ".join("?" * len(FINAL))
# meta: events recorded before this time may have been pruned (the invariant checker reads it)
EVENTS_PRUNED_BEFORE = "retention:events_pruned_before"
_CHILDREN = {"facts": "seq", "grants": "rowid", "events": "seq",
             "flight_concurrency": "flight_id", "flight_grace": "flight_id",
             "flight_after": "flight_id", "flight_dependencies": "flight_id",
             "flight_limits": "flight_id", "flight_notes": "flight_id",
             "flight_secrets": "flight_id", "flight_retries": "flight_id",
             "flight_attempts": "rowid", "flight_reruns": "flight_id",
             # artifacts (docs/work-graphs.md): their blobs go once no flight names them
             "flight_artifacts": "flight_id", "flight_artifact_terms": "flight_id",
             "flight_inputs": "flight_id"}


class RetentionRows:
    db: Database
    # the tables whose rows go with a pruned flight, in the order they are pruned: a new
    # per-flight table is named once, in _CHILDREN
    flight_children: tuple[str, ...] = tuple(_CHILDREN)

    def prunable_flights(self, ended_before: float, limit: int) -> list[str]:
        """Up to ``limit`` final flights that ended before ``ended_before``, oldest end first:
        a walk of the index ``flights_ended`` in order that stops after ``limit`` (left to
        itself the planner would gather every final flight by stage, then sort them)."""
        rows = self.db.all(
            "SELECT id FROM flights INDEXED BY flights_ended "
            f"WHERE stage IN ({_FINAL_MARKS}) AND ended_at < ? ORDER BY ended_at LIMIT ?",
            (*FINAL, ended_before, limit))
        return [r[0] for r in rows]

    def delete_flight_children(self, table: str, flight_ids: list[str], limit: int) -> int:
        """Delete up to ``limit`` rows of ``table`` (facts, grants, events, limits) that belong to
        ``flight_ids``; the number deleted."""
        key = _CHILDREN[table]
        marks = ", ".join("?" * len(flight_ids))
        cur = self.db.run(
            f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table} "
            f"WHERE flight_id IN ({marks}) LIMIT ?)", (*flight_ids, limit))
        return cur.rowcount

    def delete_ended_flights(self, flight_ids: list[str], ended_before: float) -> int:
        """Delete these flights' rows, each only if it is final and ended before
        ``ended_before``."""
        marks = ", ".join("?" * len(flight_ids))
        cur = self.db.run(
            f"DELETE FROM flights WHERE id IN ({marks}) AND stage IN ({_FINAL_MARKS}) "
            "AND ended_at < ?", (*flight_ids, *FINAL, ended_before))
        return cur.rowcount

    def prune_events(self, before: float, limit: int) -> int:
        """Delete up to ``limit`` events recorded before ``before``, oldest first, except those
        of a flight that is not final (its history stays whole while it may still run)."""
        cur = self.db.run(
            f"""DELETE FROM events WHERE seq IN (
                  SELECT e.seq FROM events e LEFT JOIN flights f ON f.id = e.flight_id
                   WHERE e.at < ? AND (f.id IS NULL OR f.stage IN ({_FINAL_MARKS}))
                   ORDER BY e.at LIMIT ?)""", (before, *FINAL, limit))
        return cur.rowcount

    def note_events_pruned(self, before: float) -> None:
        self.db.run("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
                    "SET value = excluded.value", (EVENTS_PRUNED_BEFORE, repr(before)))

    def database_bytes(self) -> int:
        """The store's size: SQLite's file and write-ahead log, or PostgreSQL's database."""
        return self.db.size()

    def backup_to(self, path) -> int:
        """Copy the whole store into the new SQLite file ``path`` with SQLite's online
        backup (other connections keep writing meanwhile; the copy is one snapshot, its own
        write-ahead log folded in); the copy's size in bytes. The file is the owner's alone.
        SQLite only: a PostgreSQL store is backed up with PostgreSQL's own tools."""
        import sqlite3

        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        target = sqlite3.connect(str(path))
        try:
            self.db.conn.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")
        finally:
            target.close()
        return os.path.getsize(path)

    def vacuum(self) -> None:
        """Rewrite the file without its free pages (needs the store to itself), then fold
        and truncate the write-ahead log."""
        self.db.run("VACUUM")
        self.db.run("PRAGMA wal_checkpoint(TRUNCATE)")
