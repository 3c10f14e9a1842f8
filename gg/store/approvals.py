"""Approval rows: which environments require an approval for every flight (gg.domain.approvals).

The range of approvals and services is 730-749 (the service spec column is 732). Approval gates
themselves are rows of ``gates`` (clearer
``approver``); the root envelope's ``approvals:`` is a column of ``root_envelope``.
"""

from __future__ import annotations

import sqlite_utils

from gg.domain.gates import Gate
from gg.store.db import Database
from gg.store.gates import gate_from_row


def migrate_approver_clearer(db: sqlite_utils.Database) -> None:
    """SQLite cannot widen a CHECK in place: the gates table is rebuilt with ``approver``
    among its clearers, every row and index kept."""
    columns = ("id, kind, subject, guards, why, clearer, opened_at, opened_by, runner_id, "
               "flight_id, payload, status, cleared_at, cleared_by")
    db.executescript(
        f"""
        CREATE TABLE gates_new (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            subject TEXT NOT NULL,
            guards TEXT NOT NULL,
            why TEXT NOT NULL,
            clearer TEXT NOT NULL CHECK (clearer IN ('admin', 'opener', 'machine', 'approver')),
            opened_at REAL NOT NULL,
            opened_by TEXT,
            runner_id TEXT,
            flight_id TEXT,
            payload TEXT NOT NULL DEFAULT '{{}}',
            status TEXT NOT NULL DEFAULT 'open',
            cleared_at REAL,
            cleared_by TEXT
        );
        INSERT INTO gates_new ({columns}) SELECT {columns} FROM gates;
        DROP TABLE gates;
        ALTER TABLE gates_new RENAME TO gates;
        CREATE INDEX gates_open ON gates(status, subject);
        CREATE INDEX gates_runner ON gates(runner_id, status);
        CREATE INDEX gates_flight ON gates(flight_id, status);
        """
    )


def migrate_approvals(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE environment_approvals (
            name TEXT PRIMARY KEY,
            set_at REAL NOT NULL,
            set_by TEXT
        );
        ALTER TABLE root_envelope ADD COLUMN approvals TEXT NOT NULL DEFAULT '[]';
        """
    )


def migrate_service_spec(db: sqlite_utils.Database) -> None:
    """A service flight's spec (gg.domain.services), JSON; NULL for every other flight."""
    db.executescript("ALTER TABLE flights ADD COLUMN service TEXT;")


class ApprovalRows:
    db: Database

    def environment_requires_approval(self, name: str) -> bool:
        return self.db.one("SELECT 1 FROM environment_approvals WHERE name = ?",
                           (name,)) is not None

    def environments_requiring_approval(self) -> set[str]:
        return {r[0] for r in self.db.all("SELECT name FROM environment_approvals")}

    def set_environment_approval(self, name: str, required: bool, *, at: float,
                                 by: str | None) -> bool:
        """Require (or stop requiring) an approval in ``name``; True when that changed."""
        if required:
            return self.db.run("INSERT INTO environment_approvals (name, set_at, set_by) "
                               "VALUES (?, ?, ?) ON CONFLICT(name) DO NOTHING",
                               (name, at, by)).rowcount > 0
        return self.db.run("DELETE FROM environment_approvals WHERE name = ?",
                           (name,)).rowcount > 0

    def flight_gates(self, flight_id: str, *, kind: str | None = None,
                     status: str | None = "open") -> list[Gate]:
        """The gates opened for one flight (newest first)."""
        where, params = ["flight_id = ?"], [flight_id]
        for column, value in (("kind", kind), ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        rows = self.db.all("SELECT * FROM gates WHERE " + " AND ".join(where)
                           + " ORDER BY opened_at DESC, id", tuple(params))
        return [gate_from_row(r) for r in rows]
