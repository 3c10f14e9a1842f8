"""People and the organisation."""

from __future__ import annotations

from dataclasses import fields

from gg.domain.people import Person
from gg.store.db import Database

_COLUMNS = tuple(f.name for f in fields(Person))


class PeopleRows:
    db: Database

    def organisation(self) -> dict | None:
        row = self.db.one("SELECT * FROM organisation LIMIT 1")
        return dict(row) if row else None

    def create_organisation(self, org_id: str, name: str, now: float) -> bool:
        """Make the organisation unless one exists (one per store, however many servers
        start on it together); True when this call made it."""
        cur = self.db.run("INSERT INTO organisation (id, name, created_at) SELECT ?, ?, ? "
                          "WHERE NOT EXISTS (SELECT 1 FROM organisation)", (org_id, name, now))
        return cur.rowcount == 1

    def create_person(self, *, id: str, name: str, role: str, token_hash: str,
                      token_fingerprint: str, is_owner: bool, now: float,
                      token_expires_at: float | None = None) -> Person:
        values = {"id": id, "name": name, "role": role, "token_hash": token_hash,
                  "token_fingerprint": token_fingerprint, "is_owner": int(is_owner),
                  "created_at": now, "token_minted_at": now, "token_expires_at": token_expires_at}
        self.db.insert("people", values)
        return _person(self.db.one("SELECT * FROM people WHERE id = ?", (id,)))

    def person(self, person_id: str) -> Person | None:
        row = self.db.one("SELECT * FROM people WHERE id = ?", (person_id,))
        return _maybe_person(row)

    def person_by_name(self, name: str) -> Person | None:
        return _maybe_person(self.db.one("SELECT * FROM people WHERE name = ?", (name,)))

    def person_by_token_hash(self, token_hash: str) -> tuple[Person, str] | None:
        """The person whose token hashes to ``token_hash``, and the hash their row holds (for
        the caller's constant-time check); the hash is never part of the :class:`Person`."""
        row = self.db.one("SELECT * FROM people WHERE token_hash = ?", (token_hash,))
        return None if row is None else (_person(row), row["token_hash"])

    def people(self, removed: bool = True) -> list[Person]:
        """Everyone, oldest first; removed people too unless ``removed`` is False (their names
        still label the history they made)."""
        where = "" if removed else " WHERE removed_at IS NULL"
        return [_person(r) for r in self.db.all(f"SELECT * FROM people{where} ORDER BY created_at")]

    def set_person_token(self, person_id: str, *, token_hash: str, token_fingerprint: str,
                         token_expires_at: float | None, now: float) -> None:
        """The person's one token is replaced: the old hash is gone, so the old token is dead."""
        self.db.update("people", "id", person_id, {
            "token_hash": token_hash, "token_fingerprint": token_fingerprint,
            "token_expires_at": token_expires_at, "token_minted_at": now})

    def remove_person(self, person_id: str, *, dead_hash: str, removed_by: str, now: float) -> bool:
        """Tombstone: the row stays (name, role, history), its token hash is replaced by one
        no token has, and it is marked removed. False when it was removed already."""
        cur = self.db.run(
            "UPDATE people SET token_hash = ?, token_expires_at = ?, removed_at = ?, removed_by = ?"
            " WHERE id = ? AND removed_at IS NULL",
            (dead_hash, now, now, removed_by, person_id))
        return cur.rowcount == 1


def _maybe_person(row) -> Person | None:
    return None if row is None else _person(row)


def _person(row) -> Person:
    values = {name: row[name] for name in _COLUMNS}
    values["is_owner"] = bool(values["is_owner"])
    return Person(**values)
