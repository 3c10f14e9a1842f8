"""Background duties held by one server process at a time (gg.control.duties)."""

from __future__ import annotations

from gg.store.db import Database


class DutyRows:
    db: Database

    def take_duty(self, name: str, holder: str, now: float, until: float) -> bool:
        """Hold ``name`` until ``until``: taken when nobody holds it, renewed when ``holder``
        does, and taken over when its holder let it lapse; one conditional write, so two
        processes can never both hold it. True when ``holder`` holds it now."""
        cur = self.db.run(
            "INSERT INTO duties (name, holder, renewed_at, until) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
            "renewed_at = excluded.renewed_at, until = excluded.until "
            "WHERE duties.holder = excluded.holder OR duties.until < excluded.renewed_at",
            (name, holder, now, until))
        return cur.rowcount == 1

    def drop_duties(self, holder: str) -> int:
        """``holder`` stops: its duties are free for another at once."""
        return self.db.run("DELETE FROM duties WHERE holder = ?", (holder,)).rowcount

    def duty_renewed_by_another(self, holder: str, since: float) -> bool:
        """Whether another process renewed a duty at ``since`` or later (it is serving)."""
        return self.db.one("SELECT 1 FROM duties WHERE holder != ? AND renewed_at >= ? LIMIT 1",
                           (holder, since)) is not None
