"""Runner groups, the attribute registry and the fleet-wide stop (SPEC section 17).

The migrations of the groups range (700-719) live here beside the rows they create (their
numbers are in ``gg.store.migrations.MIGRATIONS``). The
columns ``group`` and ``where`` are SQL keywords, so every statement quotes them.
"""

from __future__ import annotations

import sqlite_utils

from gg.domain.flights import Stage
from gg.domain.groups import Attribute, Group
from gg.store.db import Database, dumps, loads


def migrate_groups(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE runner_groups (
            name TEXT PRIMARY KEY,
            attributes TEXT NOT NULL DEFAULT '{}',
            bindings TEXT NOT NULL DEFAULT '[]',
            exclusive INTEGER NOT NULL DEFAULT 0,
            drain_at REAL,
            drain_by TEXT,
            created_at REAL NOT NULL,
            updated_at REAL,
            updated_by TEXT
        );
        INSERT INTO runner_groups (name, created_at) VALUES ('default', 0);
        CREATE TABLE attributes (
            key TEXT PRIMARY KEY,
            allowed TEXT NOT NULL DEFAULT '[]',
            set_at REAL NOT NULL,
            set_by TEXT
        );
        CREATE TABLE fleet_stop (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            quiesced_at REAL NOT NULL,
            quiesced_by TEXT NOT NULL,
            drained_noted INTEGER NOT NULL DEFAULT 0
        );
        ALTER TABLE runners ADD COLUMN "group" TEXT NOT NULL DEFAULT 'default';
        CREATE INDEX runners_group ON runners("group");
        ALTER TABLE flights ADD COLUMN "group" TEXT;
        ALTER TABLE flights ADD COLUMN "where" TEXT NOT NULL DEFAULT '{}';
        ALTER TABLE enrol_tokens ADD COLUMN "group" TEXT NOT NULL DEFAULT 'default';
        """
    )


def _group(row) -> Group:
    return Group(name=row["name"], attributes=loads(row["attributes"], {}),
                 bindings=tuple(loads(row["bindings"], [])), exclusive=bool(row["exclusive"]),
                 draining=row["drain_at"] is not None, drain_by=row["drain_by"],
                 drain_at=row["drain_at"], updated_at=row["updated_at"],
                 updated_by=row["updated_by"])


class GroupRows:
    db: Database

    # -- groups -----------------------------------------------------------------------------

    def group(self, name: str) -> Group | None:
        row = self.db.one("SELECT * FROM runner_groups WHERE name = ?", (name,))
        return _group(row) if row else None

    def groups(self) -> list[Group]:
        rows = self.db.all_kept("runner_groups", "SELECT * FROM runner_groups ORDER BY name")
        return [_group(r) for r in rows]

    def ensure_group(self, name: str, now: float) -> bool:
        """Make the row of group ``name`` if it is absent; True when it was made."""
        cur = self.db.run("INSERT OR IGNORE INTO runner_groups (name, created_at) VALUES (?, ?)",
                          (name, now))
        return cur.rowcount == 1

    def save_group(self, group: Group, now: float) -> None:
        self.db.run(
            "INSERT INTO runner_groups (name, attributes, bindings, exclusive, drain_at, "
            "drain_by, created_at, updated_at, updated_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET attributes = excluded.attributes, "
            "bindings = excluded.bindings, exclusive = excluded.exclusive, "
            "drain_at = excluded.drain_at, drain_by = excluded.drain_by, "
            "updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            (group.name, dumps(dict(group.attributes)), dumps(list(group.bindings)),
             int(group.exclusive), group.drain_at if group.draining else None,
             group.drain_by if group.draining else None, now, group.updated_at,
             group.updated_by))

    def delete_group(self, name: str) -> int:
        return self.db.run("DELETE FROM runner_groups WHERE name = ?", (name,)).rowcount

    def group_members(self, name: str) -> list[tuple[str, str]]:
        """(id, name) of the unretired runners in group ``name``."""
        rows = self.db.all('SELECT id, name FROM runners WHERE "group" = ? AND retired_at IS NULL '
                           "ORDER BY created_at, id", (name,))
        return [(r[0], r[1]) for r in rows]

    def member_counts(self) -> dict[str, int]:
        rows = self.db.all('SELECT "group", count(*) FROM runners WHERE retired_at IS NULL '
                           'GROUP BY "group"')
        return {r[0]: r[1] for r in rows}

    def redeemable_tokens_naming(self, name: str, now: float) -> int:
        row = self.db.one('SELECT count(*) FROM enrol_tokens WHERE "group" = ? '
                          "AND (uses = 0 OR uses_left > 0) AND expires_at > ? "
                          "AND revoked_at IS NULL", (name, now))
        assert row is not None, "count(*) answers one row"
        return row[0]

    # -- demand -----------------------------------------------------------------------------

    def ready_placements(self) -> list[tuple[dict, int]]:
        """Ready flights, one per placement the group rule tells apart, with how many."""
        rows = self.db.all(
            'SELECT "group", "where", environment, repo, count(*) FROM flights '
            'WHERE stage = ? GROUP BY "group", "where", environment, repo', (Stage.READY.value,))
        return [({"group": r[0], "where": loads(r[1], {}), "environment": r[2], "repo": r[3]},
                 r[4]) for r in rows]

    def flying_in_group(self, name: str) -> int:
        row = self.db.one(
            'SELECT count(*) FROM flights JOIN runners ON runners.id = flights.lease_runner '
            'WHERE flights.stage = ? AND runners."group" = ?', (Stage.FLYING.value, name))
        assert row is not None, "count(*) answers one row"
        return row[0]

    def flying_count(self) -> int:
        row = self.db.one("SELECT count(*) FROM flights WHERE stage = ?", (Stage.FLYING.value,))
        assert row is not None, "count(*) answers one row"
        return row[0]

    # -- attributes -------------------------------------------------------------------------

    def attributes(self) -> dict[str, Attribute]:
        rows = self.db.all("SELECT key, allowed FROM attributes ORDER BY key")
        return {r[0]: Attribute(r[0], tuple(loads(r[1], []))) for r in rows}

    def save_attribute(self, attr: Attribute, now: float, by: str) -> None:
        self.db.run("INSERT INTO attributes (key, allowed, set_at, set_by) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET allowed = excluded.allowed, "
                    "set_at = excluded.set_at, set_by = excluded.set_by",
                    (attr.key, dumps(list(attr.values)), now, by))

    # -- the fleet-wide stop ----------------------------------------------------------------

    def fleet_stop(self) -> dict | None:
        rows = self.db.all_kept("fleet_stop", "SELECT * FROM fleet_stop WHERE id = 1")
        return dict(rows[0]) if rows else None

    def quiesce(self, now: float, by: str) -> bool:
        cur = self.db.run("INSERT OR IGNORE INTO fleet_stop (id, quiesced_at, quiesced_by) "
                          "VALUES (1, ?, ?)", (now, by))
        return cur.rowcount == 1

    def unquiesce(self) -> bool:
        return self.db.run("DELETE FROM fleet_stop WHERE id = 1").rowcount == 1

    def note_fleet_drained(self) -> bool:
        """Mark this quiesce's drained moment as recorded; True only the first time."""
        cur = self.db.run("UPDATE fleet_stop SET drained_noted = 1 WHERE id = 1 "
                          "AND drained_noted = 0")
        return cur.rowcount == 1
