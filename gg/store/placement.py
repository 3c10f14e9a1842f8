"""Placement rows: environments, the root envelope, label dispositions, attended deadlines.

The migrations of the placement range (100-199) that are not gates live here, beside the
rows they create; their numbers and names are in the one list,
``gg.store.migrations.MIGRATIONS``, and they run in its order.
"""

from __future__ import annotations

from typing import Any

import sqlite_utils

from gg.domain.environments import Environment, RootEnvelope
from gg.domain.flights import Stage
from gg.store.db import Database, dumps, loads

ROOT_IMAGES = "root_images"  # meta key: the root envelope's images per environment


def migrate_environments(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE environments (
            name TEXT PRIMARY KEY,
            meaning TEXT,
            gate_id TEXT,
            charted_at REAL NOT NULL,
            charted_by TEXT,
            cleared_at REAL,
            cleared_by TEXT
        );
        CREATE TABLE root_envelope (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            environments TEXT NOT NULL,
            applied_at REAL NOT NULL,
            applied_by TEXT
        );
        """
    )


def migrate_dispositions(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE label_dispositions (
            runner_id TEXT PRIMARY KEY,
            labels TEXT NOT NULL DEFAULT '{}',
            dispositions TEXT NOT NULL DEFAULT '[]',
            refuted TEXT NOT NULL DEFAULT '[]',
            computed_at REAL NOT NULL
        );
        CREATE INDEX flights_environment ON flights(environment, stage);
        CREATE INDEX flights_attended ON flights(attended, stage, opened_at);
        """
    )


def _environment(row) -> Environment:
    return Environment(name=row["name"], meaning=row["meaning"], gate_id=row["gate_id"],
                       charted_at=row["charted_at"], charted_by=row["charted_by"],
                       cleared_at=row["cleared_at"], cleared_by=row["cleared_by"])


# When the oldest attended flight nobody took yet was opened (its deadline is CLAIM_WAIT
# later), a subquery of UNTAKEN_STAGES' two parameters (``Store.next_looks`` reads it too)
FIRST_UNTAKEN_ATTENDED = ("(SELECT min(opened_at) FROM flights WHERE attended = 1 "
                          "AND stage IN (?, ?) AND attempt = 0)")
UNTAKEN_STAGES = (Stage.READY.value, Stage.GATED.value)


class PlacementRows:
    db: Database

    # -- environments ---------------------------------------------------------------------

    def environment(self, name: str) -> Environment | None:
        row = self.db.one("SELECT * FROM environments WHERE name = ?", (name,))
        return _environment(row) if row else None

    def environments(self) -> list[Environment]:
        return [_environment(r) for r in self.db.all("SELECT * FROM environments ORDER BY name")]

    def save_environment(self, env: Environment) -> None:
        self.db.run(
            "INSERT INTO environments (name, meaning, gate_id, charted_at, charted_by, "
            "cleared_at, cleared_by) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
            "meaning = excluded.meaning, gate_id = excluded.gate_id, "
            "charted_at = excluded.charted_at, charted_by = excluded.charted_by, "
            "cleared_at = excluded.cleared_at, cleared_by = excluded.cleared_by",
            (env.name, env.meaning, env.gate_id, env.charted_at, env.charted_by,
             env.cleared_at, env.cleared_by))

    def delete_environment(self, name: str) -> None:
        self.db.run("DELETE FROM environments WHERE name = ?", (name,))

    def unended_flights_in(self, environment: str) -> list[str]:
        """Flights in ``environment`` that have not ended (gated, ready or flying)."""
        rows = self.db.all("SELECT id FROM flights WHERE environment = ? "
                           "AND stage IN (?, ?, ?) ORDER BY seq",
                           (environment, Stage.GATED.value, Stage.READY.value,
                            Stage.FLYING.value))
        return [r[0] for r in rows]

    def waiting_flights_in(self, environment: str) -> list[str]:
        rows = self.db.all("SELECT id FROM flights WHERE environment = ? "
                           "AND stage IN (?, ?) ORDER BY seq",
                           (environment, Stage.READY.value, Stage.GATED.value))
        return [r[0] for r in rows]

    # -- the root envelope ------------------------------------------------------------------

    def root_envelope(self) -> RootEnvelope | None:
        row = self.db.one("SELECT * FROM root_envelope WHERE id = 1")
        if row is None:
            return None
        return RootEnvelope(environments=tuple(loads(row["environments"], [])),
                            applied_at=row["applied_at"], applied_by=row["applied_by"],
                            timeouts=loads(row["timeouts"], {}),
                            approvals=tuple(loads(row["approvals"], [])))

    def save_root_envelope(self, root: RootEnvelope) -> None:
        self.db.run(
            "INSERT INTO root_envelope (id, environments, applied_at, applied_by, timeouts, "
            "approvals) VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
            "environments = excluded.environments, "
            "applied_at = excluded.applied_at, applied_by = excluded.applied_by, "
            "timeouts = excluded.timeouts, approvals = excluded.approvals",
            (dumps(list(root.environments)), root.applied_at, root.applied_by,
             dumps(root.timeouts), dumps(list(root.approvals))))

    # The root envelope's ``images:`` (an environment's container image), kept in ``meta``
    # under ROOT_IMAGES rather than a root_envelope column: replicas of the previous release
    # read that table with ``SELECT *`` (docs/architecture.md), and no migration is needed.

    def root_images(self) -> dict[str, str]:
        row = self.db.one("SELECT value FROM meta WHERE key = ?", (ROOT_IMAGES,))
        return dict(loads(row["value"], {})) if row is not None else {}

    def save_root_images(self, images: dict[str, str]) -> None:
        """The root envelope's ``images:``, replacing what an earlier root set."""
        self.db.run("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
                    "SET value = excluded.value", (ROOT_IMAGES, dumps(images)))

    # -- label dispositions -----------------------------------------------------------------

    def save_dispositions(self, runner_id: str, *, labels: dict[str, str],
                          dispositions: list[dict], refuted: list[str], at: float) -> None:
        self.db.run(
            "INSERT INTO label_dispositions (runner_id, labels, dispositions, refuted, computed_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT(runner_id) DO UPDATE SET labels = excluded.labels, "
            "dispositions = excluded.dispositions, refuted = excluded.refuted, "
            "computed_at = excluded.computed_at",
            (runner_id, dumps(labels), dumps(dispositions), dumps(sorted(refuted)), at))

    def dispositions_of(self, runner_id: str) -> dict[str, Any] | None:
        row = self.db.one("SELECT * FROM label_dispositions WHERE runner_id = ?", (runner_id,))
        return _dispositions_row(row) if row else None

    def all_dispositions(self) -> dict[str, dict[str, Any]]:
        return {r["runner_id"]: _dispositions_row(r)
                for r in self.db.all("SELECT * FROM label_dispositions")}

    def refuted_pairs(self, runner_id: str) -> frozenset[str]:
        row = self.db.one("SELECT refuted FROM label_dispositions WHERE runner_id = ?",
                          (runner_id,))
        return frozenset(loads(row[0], [])) if row else frozenset()

    def refuted_by_runner(self) -> dict[str, frozenset[str]]:
        """Only runners with something refuted: the matcher's one look per snapshot."""
        rows = self.db.all("SELECT runner_id, refuted FROM label_dispositions "
                           "WHERE refuted != '[]'")
        return {r[0]: frozenset(loads(r[1], [])) for r in rows}

    # -- attended flights -------------------------------------------------------------------

    def untaken_attended(self, opened_before: float, limit: int = 500) -> list[str]:
        """Attended flights never taken and opened before ``opened_before`` (overdue)."""
        rows = self.db.all(
            "SELECT id FROM flights WHERE attended = 1 AND stage IN (?, ?) "
            "AND attempt = 0 AND opened_at <= ? ORDER BY opened_at LIMIT ?",
            (Stage.READY.value, Stage.GATED.value, opened_before, limit))
        return [r[0] for r in rows]

    def first_untaken_attended(self) -> float | None:
        """When the oldest attended flight that nobody took yet was opened."""
        row = self.db.one(f"SELECT {FIRST_UNTAKEN_ATTENDED}", UNTAKEN_STAGES)
        return row[0] if row else None


def _dispositions_row(row) -> dict[str, Any]:
    return {"labels": loads(row["labels"], {}), "dispositions": loads(row["dispositions"], []),
            "refuted": loads(row["refuted"], []), "computed_at": row["computed_at"]}
