"""Web console sessions, kept by the hash of their secret."""

from __future__ import annotations

from gg.store.db import Database


class SessionRows:
    db: Database

    def add_session(self, *, token_hash: str, person_id: str, person_token_hash: str,
                    now: float, expires_at: float) -> None:
        self.db.insert("console_sessions", {"token_hash": token_hash, "person_id": person_id,
                                            "person_token_hash": person_token_hash,
                                            "created_at": now, "expires_at": expires_at})

    def session(self, token_hash: str) -> dict | None:
        row = self.db.one("SELECT * FROM console_sessions WHERE token_hash = ?", (token_hash,))
        return dict(row) if row else None

    def delete_session(self, token_hash: str) -> bool:
        cur = self.db.run("DELETE FROM console_sessions WHERE token_hash = ?", (token_hash,))
        return cur.rowcount == 1

    def delete_sessions_ended(self, now: float) -> int:
        return self.db.run("DELETE FROM console_sessions WHERE expires_at <= ?", (now,)).rowcount
