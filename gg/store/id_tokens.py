"""The identity tokens' signing keys (table ``signing_keys``, migration 960; docs/jobs.md).

In the database, not in a file, so that every replica sharing the store signs with the same
key and publishes the same JWKS. ``is_current`` is 1 for the one key that signs now and NULL
for a retired one: a unique column, so the first replica to store a current key wins (NULLs
never collide), on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import sqlite_utils

from gg.store.db import Database


def migrate_signing_keys(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE signing_keys (
            kid TEXT PRIMARY KEY,
            private_pem TEXT NOT NULL,
            public_jwk TEXT NOT NULL,
            created_at REAL NOT NULL,
            retired_at REAL,
            is_current INTEGER UNIQUE
        );
        """
    )


class SigningKeyRows:
    db: Database

    def current_signing_key(self) -> dict | None:
        row = self.db.one("SELECT kid, private_pem, public_jwk, created_at FROM signing_keys "
                          "WHERE is_current = 1")
        return dict(row) if row else None

    def add_signing_key(self, kid: str, private_pem: str, public_jwk: str, now: float) -> bool:
        """Store a current key unless one is current already; True when this one was."""
        return self.db.run(
            "INSERT INTO signing_keys (kid, private_pem, public_jwk, created_at, is_current) "
            "VALUES (?, ?, ?, ?, 1) ON CONFLICT(is_current) DO NOTHING",
            (kid, private_pem, public_jwk, now)).rowcount > 0

    def retire_signing_key(self, kid: str, now: float) -> bool:
        """The current key ``kid`` signs no more; True when it was current."""
        return self.db.run("UPDATE signing_keys SET is_current = NULL, retired_at = ? "
                           "WHERE kid = ? AND is_current = 1", (now, kid)).rowcount > 0

    def published_signing_keys(self, retired_since: float) -> list[dict]:
        """The public halves of the current key and of those retired after ``retired_since``,
        newest first."""
        rows = self.db.all("SELECT kid, public_jwk, created_at, retired_at FROM signing_keys "
                           "WHERE retired_at IS NULL OR retired_at > ? "
                           "ORDER BY created_at DESC, kid", (retired_since,))
        return [dict(r) for r in rows]
