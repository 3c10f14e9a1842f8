"""Secrets, sealed (table ``secrets``), and the secrets each flight asked for (table
``flight_secrets``, keyed by flight id): migration 950. No value is ever stored unsealed;
the sealing is gg.control.sealing's."""

from __future__ import annotations

import sqlite_utils

from gg.domain.sealed import Sealed
from gg.store.db import Database


def migrate_secrets(db: sqlite_utils.Database) -> None:
    """``gg secret set NAME [--env E]`` and ``gg fly --secret NAME[=ENVVAR]`` (docs/jobs.md).
    A secret is its name and scope (``env``: an environment, or '' for every one), its value
    sealed (AES-GCM: ``key_id`` names the key, ``nonce`` is its own). A flight's uses are rows
    of their own, not a flights column (docs/architecture.md)."""
    db.executescript(
        """
        CREATE TABLE secrets (
            name TEXT NOT NULL,
            env TEXT NOT NULL DEFAULT '',
            key_id TEXT NOT NULL,
            nonce BLOB NOT NULL,
            sealed BLOB NOT NULL,
            set_by TEXT,
            set_at REAL NOT NULL,
            PRIMARY KEY (name, env)
        );
        CREATE TABLE flight_secrets (
            flight_id TEXT NOT NULL,
            name TEXT NOT NULL,
            envvar TEXT NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY (flight_id, name, envvar)
        );
        """
    )


def _sealed(row) -> Sealed:
    return Sealed(row["key_id"], bytes(row["nonce"]), bytes(row["sealed"]))


class SecretRows:
    db: Database

    def set_secret(self, name: str, env: str, sealed: Sealed, *, set_by: str | None,
                   now: float) -> bool:
        """Keep ``sealed`` as secret ``name`` in scope ``env``; True when it replaced one."""
        cur = self.db.run("DELETE FROM secrets WHERE name = ? AND env = ?", (name, env))
        self.db.insert("secrets", {"name": name, "env": env, "key_id": sealed.key_id,
                                   "nonce": sealed.nonce, "sealed": sealed.sealed,
                                   "set_by": set_by, "set_at": now})
        return cur.rowcount == 1

    def remove_secret(self, name: str, env: str) -> bool:
        return self.db.run("DELETE FROM secrets WHERE name = ? AND env = ?",
                           (name, env)).rowcount == 1

    def secrets(self) -> list[dict]:
        """Every secret's name, scope, who set it and when: never its value."""
        rows = self.db.all("SELECT name, env, set_by, set_at FROM secrets ORDER BY name, env")
        return [dict(r) for r in rows]

    def secret_scopes(self, names: list[str]) -> dict[str, set[str]]:
        """name -> the scopes it is set in, for each of ``names`` (absent: set in none)."""
        out: dict[str, set[str]] = {n: set() for n in names}
        if names:
            rows = self.db.all(f"SELECT name, env FROM secrets WHERE name IN "
                               f"({','.join('?' * len(names))})", tuple(names))
            for name, env in rows:
                out[name].add(env)
        return out

    def sealed_secret(self, name: str, env: str) -> Sealed | None:
        row = self.db.one("SELECT key_id, nonce, sealed FROM secrets WHERE name = ? AND env = ?",
                          (name, env))
        return _sealed(row) if row else None

    def sealed_secrets(self) -> list[tuple[str, str, Sealed]]:
        """Every secret as (name, scope, sealed): what a rotation re-seals."""
        rows = self.db.all("SELECT name, env, key_id, nonce, sealed FROM secrets")
        return [(r["name"], r["env"], _sealed(r)) for r in rows]

    def reseal_secret(self, name: str, env: str, sealed: Sealed) -> None:
        self.db.run("UPDATE secrets SET key_id = ?, nonce = ?, sealed = ? WHERE name = ? "
                    "AND env = ?", (sealed.key_id, sealed.nonce, sealed.sealed, name, env))

    def secret_key_ids(self) -> set[str]:
        return {r[0] for r in self.db.all("SELECT DISTINCT key_id FROM secrets")}

    def set_flight_secrets(self, flight_id: str, uses: list[tuple[str, str]]) -> None:
        for position, (name, envvar) in enumerate(uses):
            self.db.insert("flight_secrets", {"flight_id": flight_id, "name": name,
                                              "envvar": envvar, "position": position})

    def flight_secrets(self, flight_id: str) -> list[tuple[str, str]]:
        """The (name, variable) pairs the flight asked for, in the order given."""
        rows = self.db.all("SELECT name, envvar FROM flight_secrets WHERE flight_id = ? "
                           "ORDER BY position", (flight_id,))
        return [(r[0], r[1]) for r in rows]
