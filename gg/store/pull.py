"""Pull mode: the control plane's own signing key, and the runners it polls.

The control plane's Ed25519 key lives in the database, not in a file, so that every server
sharing one store (a later PostgreSQL store, several replicas) signs with the same key: it is
created once per database (the first writer wins; the others read the winner's).
"""

from __future__ import annotations

import sqlite_utils

from gg.domain.pull import MODE_PULL
from gg.domain.runners import Runner
from gg.store.db import Database
from gg.store.runners import runner_from_row


def migrate_control_key(db: sqlite_utils.Database) -> None:
    """One row at most (``id = 1``): the private key as PKCS#8 PEM, and its public half."""
    db.executescript(
        """
        CREATE TABLE control_key (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            private_pem TEXT NOT NULL,
            public_key TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        """
    )


def migrate_runner_mode(db: sqlite_utils.Database) -> None:
    """``mode``: ``dial`` (it dials out to the control plane) or ``pull`` (the control plane
    polls it at ``url``)."""
    db.executescript(
        """
        ALTER TABLE runners ADD COLUMN mode TEXT NOT NULL DEFAULT 'dial';
        ALTER TABLE runners ADD COLUMN url TEXT;
        """
    )


class PullRows:
    db: Database

    def control_key(self) -> dict | None:
        row = self.db.one("SELECT private_pem, public_key, created_at FROM control_key "
                          "WHERE id = 1")
        return dict(row) if row else None

    def add_control_key(self, private_pem: str, public_key: str, now: float) -> bool:
        """Store the key unless one is stored already; True when this one was stored."""
        return self.db.run("INSERT INTO control_key (id, private_pem, public_key, created_at) "
                           "VALUES (1, ?, ?, ?) ON CONFLICT(id) DO NOTHING",
                           (private_pem, public_key, now)).rowcount > 0

    def pull_runners(self) -> list[Runner]:
        """Every attached runner the control plane still polls: live ones, and retired ones
        that still hold a lease (they are told to stop and hand it back)."""
        rows = self.db.all(
            "SELECT * FROM runners WHERE mode = ? AND (retired_at IS NULL OR id IN "
            "(SELECT lease_runner FROM flights WHERE stage = 'flying'))", (MODE_PULL,))
        return [runner_from_row(r) for r in rows]
