"""Consoles to a machine (docs/console.md): one row per console session."""

from __future__ import annotations

import dataclasses

from gg.domain.machine_console import ConsoleSession
from gg.store.db import Database, dumps, loads

_FIELDS = {f.name for f in dataclasses.fields(ConsoleSession)}


def _session(row) -> ConsoleSession:
    data = dict(row)
    data["command"] = loads(data.get("command"), [])
    return ConsoleSession(**{k: v for k, v in data.items() if k in _FIELDS})


class ConsoleRows:
    db: Database

    def add_console(self, session: ConsoleSession) -> None:
        values = dataclasses.asdict(session)
        values["command"] = dumps(values["command"])
        self.db.insert("machine_consoles", values)

    def console(self, console_id: str) -> ConsoleSession | None:
        row = self.db.one("SELECT * FROM machine_consoles WHERE id = ?", (console_id,))
        return _session(row) if row else None

    def consoles_waiting(self, runner_id: str) -> list[ConsoleSession]:
        """The runner's consoles that it has not joined yet and that are not closed."""
        rows = self.db.all("SELECT * FROM machine_consoles WHERE runner_id = ? AND closed_at IS "
                           "NULL AND joined_at IS NULL ORDER BY opened_at", (runner_id,))
        return [_session(r) for r in rows]

    def consoles_unheard(self, runner_ids: list[str]) -> set[str]:
        """The runners among ``runner_ids`` for which a console waits that no check-in answer
        has named to them yet."""
        return {row["runner_id"] for row in self.db.all_in(
            "SELECT DISTINCT runner_id FROM machine_consoles WHERE runner_id IN ({ids}) AND"
            " closed_at IS NULL AND joined_at IS NULL AND heard_at IS NULL", runner_ids)}

    def mark_consoles_heard(self, ids: list[str], at: float) -> None:
        for console_id in ids:
            self.db.run("UPDATE machine_consoles SET heard_at = ? WHERE id = ? AND heard_at IS "
                        "NULL", (at, console_id))

    def join_console(self, console_id: str, runner_id: str, at: float) -> bool:
        """Compare-and-set: only a waiting console of this runner is joined, once."""
        cur = self.db.run("UPDATE machine_consoles SET joined_at = ? WHERE id = ? AND runner_id = "
                          "? AND joined_at IS NULL AND closed_at IS NULL",
                          (at, console_id, runner_id))
        return cur.rowcount == 1

    def close_console(self, console_id: str, at: float, *, exit_code: int | None,
                      reason: str | None) -> bool:
        """Compare-and-set: a console closes once."""
        cur = self.db.run("UPDATE machine_consoles SET closed_at = ?, exit_code = ?, reason = ? "
                          "WHERE id = ? AND closed_at IS NULL",
                          (at, exit_code, reason, console_id))
        return cur.rowcount == 1

    def consoles_left_open(self) -> list[ConsoleSession]:
        rows = self.db.all("SELECT * FROM machine_consoles WHERE closed_at IS NULL")
        return [_session(r) for r in rows]

    def prune_closed_consoles(self, closed_before: float, limit: int) -> int:
        """Delete up to ``limit`` console sessions closed before ``closed_before``, oldest
        first (an open session is never pruned, whatever its age)."""
        cur = self.db.run(
            "DELETE FROM machine_consoles WHERE id IN (SELECT id FROM machine_consoles "
            "WHERE closed_at IS NOT NULL AND closed_at < ? ORDER BY closed_at LIMIT ?)",
            (closed_before, limit))
        return cur.rowcount
