"""Counts for ``GET /metrics``: read-only, indexed, and bounded per scrape."""

from __future__ import annotations

from gg.domain.events import READY_EVENTS, EventKind
from gg.domain.flights import Stage
from gg.store.db import Database

READY_KINDS = tuple(k.value for k in READY_EVENTS)
CLAIMED = EventKind.FLIGHT_CLAIMED.value
EXPIRED = EventKind.FLIGHT_EXPIRED.value


class MetricRows:
    db: Database

    def runner_presence(self) -> list[tuple]:
        """(admin_state, health, last_seen_at, goodbye_at) of every runner not retired."""
        return [tuple(r) for r in self.db.all(
            "SELECT admin_state, health, last_seen_at, goodbye_at FROM runners "
            "WHERE retired_at IS NULL")]

    def live_lease_count(self, now: float) -> int:
        row = self.db.one("SELECT count(*) FROM flights WHERE stage = ? "
                          "AND lease_expires_at > ?", (Stage.FLYING.value, now))
        assert row is not None, "count(*) answers one row"
        return row[0]

    def grants_and_expiries_after(self, seq: int, limit: int) -> list[dict]:
        """Claimed and expired events after ``seq``, oldest first, each claim with the
        flight's ``opened_at`` and the time it last became offerable (``ready_at``)."""
        kinds = ",".join("?" * len(READY_KINDS))
        rows = self.db.all(
            f"""SELECT e.seq, e.kind, e.at, f.opened_at, f.attempt,
                       CASE WHEN e.kind = ? THEN
                         (SELECT max(r.at) FROM events r
                           WHERE r.flight_id = e.flight_id AND r.seq < e.seq
                             AND r.kind IN ({kinds})) END AS ready_at,
                       CASE WHEN e.kind = ? THEN
                         NOT EXISTS (SELECT 1 FROM events p
                           WHERE p.flight_id = e.flight_id AND p.seq < e.seq
                             AND p.kind = ?) END AS first_claim
                  FROM events e LEFT JOIN flights f ON f.id = e.flight_id
                 WHERE e.kind IN (?, ?) AND e.seq > ?
                 ORDER BY e.seq LIMIT ?""",
            (CLAIMED, *READY_KINDS, CLAIMED, CLAIMED, CLAIMED, EXPIRED, seq, limit))
        return [dict(r) for r in rows]
