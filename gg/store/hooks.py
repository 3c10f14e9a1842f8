"""Hooks and their delivery outbox (see gg.domain.hooks)."""

from __future__ import annotations

from typing import Collection

from gg.store.db import Database, dumps, loads

KEPT_ANSWERS = 10  # a delivery keeps the answers of its last this many attempts

# An undelivered row with no undelivered row of the same flight to the same hook before it.
_HEADS = ("d.delivered_at IS NULL AND d.dropped_at IS NULL AND NOT EXISTS ("
          "SELECT 1 FROM hook_deliveries e WHERE e.hook_id = d.hook_id "
          "AND e.flight_id = d.flight_id AND e.seq < d.seq "
          "AND e.delivered_at IS NULL AND e.dropped_at IS NULL)")


def _skipping(sending: Collection[int], busy: Collection[str]) -> tuple[str, tuple]:
    """The SQL that leaves out the rows in ``sending`` and the rows of hooks in ``busy``."""
    sql = ""
    params: tuple[int | str, ...] = ()
    if sending:
        sql += f" AND d.seq NOT IN ({', '.join('?' * len(sending))})"
        params += tuple(sending)
    if busy:
        sql += f" AND d.hook_id NOT IN ({', '.join('?' * len(busy))})"
        params += tuple(busy)
    return sql, params


def _hook(row) -> dict:
    return dict(row) | {"events": loads(row["events"], [])}


class HookRows:
    db: Database

    def add_hook(self, *, id: str, url: str, events: list[str], environment: str | None,
                 secret: str, created_by: str | None, now: float) -> dict:
        self.db.insert("hooks", {"id": id, "url": url, "events": dumps(events),
                                 "environment": environment, "secret": secret,
                                 "created_by": created_by, "created_at": now})
        hook = self.hook(id)
        assert hook is not None, "written just now, on the same connection"
        return hook

    def hook(self, hook_id: str) -> dict | None:
        row = self.db.one("SELECT * FROM hooks WHERE id = ?", (hook_id,))
        return _hook(row) if row else None

    def hooks(self, *, removed: bool = False) -> list[dict]:
        where = "" if removed else "WHERE removed_at IS NULL"
        rows = self.db.all_kept("hooks", f"SELECT * FROM hooks {where} ORDER BY created_at, id")
        return [_hook(r) for r in rows]

    def remove_hook(self, hook_id: str, now: float) -> bool:
        """Mark the hook removed and drop its undelivered rows: nothing more is sent to it."""
        cur = self.db.run("UPDATE hooks SET removed_at = ? WHERE id = ? AND removed_at IS NULL",
                          (now, hook_id))
        self.db.run("UPDATE hook_deliveries SET dropped_at = ? WHERE hook_id = ? "
                    "AND delivered_at IS NULL AND dropped_at IS NULL", (now, hook_id))
        return cur.rowcount == 1

    def flight_environment(self, flight_id: str) -> str | None:
        row = self.db.one("SELECT environment FROM flights WHERE id = ?", (flight_id,))
        return row[0] if row else None

    def add_hook_delivery(self, *, id: str, hook_id: str, event_seq: int, kind: str,
                          flight_id: str | None, body: bytes, now: float) -> None:
        self.db.insert("hook_deliveries", {"id": id, "hook_id": hook_id, "event_seq": event_seq,
                                           "kind": kind, "flight_id": flight_id, "body": body,
                                           "created_at": now, "next_at": now})

    def due_hook_deliveries(self, now: float, limit: int, *, sending: Collection[int] = (),
                            busy: Collection[str] = ()) -> list[dict]:
        """Undelivered rows whose time has come, oldest first, each with its hook's URL and
        secret; a row waits while an earlier row of the same flight to the same hook is
        undelivered (in order per flight). Rows in ``sending`` (being sent now) and rows of
        the hooks in ``busy`` (sending as many as they may at once) are left out."""
        skip, params = _skipping(sending, busy)
        rows = self.db.all(
            "SELECT d.seq, d.id, d.hook_id, d.kind, d.flight_id, d.body, d.attempts, "
            "h.url, h.secret FROM hook_deliveries d JOIN hooks h ON h.id = d.hook_id "
            f"WHERE {_HEADS} AND d.next_at <= ? AND h.removed_at IS NULL{skip} "
            "ORDER BY d.seq LIMIT ?", (now, *params, limit))
        return [dict(r) for r in rows]

    def next_hook_due(self, *, sending: Collection[int] = (),
                      busy: Collection[str] = ()) -> float | None:
        """When the next row that could be sent is due: rows waiting behind an earlier one
        of their flight, and those ``due_hook_deliveries`` would leave out, do not count."""
        skip, params = _skipping(sending, busy)
        row = self.db.one(f"SELECT min(d.next_at) FROM hook_deliveries d WHERE {_HEADS}{skip}",
                          params)
        return row[0] if row else None

    def hook_delivery_attempts(self, seq: int) -> int:
        row = self.db.one("SELECT attempts FROM hook_deliveries WHERE seq = ?", (seq,))
        return row[0] if row else 0

    def record_hook_attempt(self, seq: int, *, attempt: int, at: float, status: int | None,
                            error: str | None, delivered: bool, next_at: float) -> None:
        self.db.insert("hook_attempts", {"delivery_seq": seq, "attempt": attempt, "at": at,
                                         "status": status, "error": error})
        self.db.run("DELETE FROM hook_attempts WHERE delivery_seq = ? AND attempt <= ?",
                    (seq, attempt - KEPT_ANSWERS))
        self.db.run("UPDATE hook_deliveries SET attempts = ?, next_at = ?, delivered_at = ? "
                    "WHERE seq = ?", (attempt, next_at, at if delivered else None, seq))

    def hook_deliveries(self, hook_id: str, limit: int) -> list[dict]:
        """The hook's last ``limit`` deliveries, newest first, each with its answers."""
        rows = [dict(r) for r in self.db.all(
            "SELECT seq, id, kind, flight_id, created_at, attempts, next_at, delivered_at, "
            "dropped_at FROM hook_deliveries WHERE hook_id = ? ORDER BY seq DESC LIMIT ?",
            (hook_id, limit))]
        for row in rows:
            row["answers"] = [dict(a) for a in self.db.all(
                "SELECT attempt, at, status, error FROM hook_attempts WHERE delivery_seq = ? "
                "ORDER BY attempt", (row["seq"],))]
        return rows

    def prune_hook_deliveries(self, before: float, limit: int) -> int:
        """Forget up to ``limit`` delivered or dropped rows made before ``before``, with
        their answers; undelivered rows are never pruned."""
        seqs = [r[0] for r in self.db.all(
            "SELECT seq FROM hook_deliveries WHERE created_at < ? AND "
            "(delivered_at IS NOT NULL OR dropped_at IS NOT NULL) ORDER BY seq LIMIT ?",
            (before, limit))]
        if not seqs:
            return 0
        marks = ", ".join("?" * len(seqs))
        self.db.run(f"DELETE FROM hook_attempts WHERE delivery_seq IN ({marks})", tuple(seqs))
        self.db.run(f"DELETE FROM hook_deliveries WHERE seq IN ({marks})", tuple(seqs))
        return len(seqs)
