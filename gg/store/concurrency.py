"""Concurrency keys and graces of flights (tables ``flight_concurrency``, ``flight_grace``;
gg.domain.concurrency): a row only for a flight that set one."""

from __future__ import annotations

from gg.domain.concurrency import Concurrency
from gg.store.db import Database


class ConcurrencyRows:
    db: Database

    def set_concurrency(self, flight_id: str, concurrency: Concurrency) -> None:
        self.db.insert("flight_concurrency", {
            "flight_id": flight_id, "key": concurrency.key, "max_flying": concurrency.limit,
            "cancel_in_progress": int(concurrency.cancel_in_progress)})

    def set_grace(self, flight_id: str, grace: float) -> None:
        self.db.insert("flight_grace", {"flight_id": flight_id, "grace": float(grace)})

    def concurrency_of(self, flight_ids: list[str]) -> dict[str, Concurrency]:
        """flight id -> its concurrency key, for those of ``flight_ids`` that have one."""
        rows = self.db.all_in("SELECT flight_id, key, max_flying, cancel_in_progress "
                              "FROM flight_concurrency WHERE flight_id IN ({ids})", flight_ids)
        return {fid: Concurrency(key, int(limit), bool(cancel))
                for fid, key, limit, cancel in rows}

    def graces_of(self, flight_ids: list[str]) -> dict[str, float]:
        """flight id -> its grace in seconds, for those of ``flight_ids`` that set one."""
        rows = self.db.all_in("SELECT flight_id, grace FROM flight_grace "
                              "WHERE flight_id IN ({ids})", flight_ids)
        return {fid: float(grace) for fid, grace in rows}

    def flying_with_keys(self, keys: set[str] | list[str]) -> dict[str, list[str]]:
        """key -> the flights with it flying now, the earliest granted first."""
        keys = sorted(set(keys))
        if not keys:
            return {}
        rows = self.db.all(
            "SELECT c.key, f.id FROM flight_concurrency AS c JOIN flights AS f "
            "ON f.id = c.flight_id WHERE f.stage = 'flying' "
            f"AND c.key IN ({','.join('?' * len(keys))}) ORDER BY f.lease_granted_at, f.seq",
            tuple(keys))
        out: dict[str, list[str]] = {}
        for key, fid in rows:
            out.setdefault(key, []).append(fid)
        return out

    def unended_with_key(self, key: str) -> list[str]:
        """The flights with ``key`` that have not ended (gated, ready or flying), oldest
        first: what a newer one with ``--cancel-in-progress`` cancels."""
        rows = self.db.all(
            "SELECT f.id FROM flight_concurrency AS c JOIN flights AS f ON f.id = c.flight_id "
            "WHERE c.key = ? AND f.stage IN ('gated', 'ready', 'flying') ORDER BY f.seq", (key,))
        return [r[0] for r in rows]
