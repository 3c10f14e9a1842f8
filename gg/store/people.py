"""People and the organisation."""

from __future__ import annotations

from gg.store.db import Database


class PeopleRows:
    db: Database

    def organisation(self) -> dict | None:
        row = self.db.one("SELECT * FROM organisation LIMIT 1")
        return dict(row) if row else None

    def create_organisation(self, org_id: str, name: str, now: float) -> None:
        self.db.insert("organisation", {"id": org_id, "name": name, "created_at": now})

    def create_person(self, *, id: str, name: str, role: str, token_hash: str,
                      token_fingerprint: str, is_owner: bool, now: float) -> dict:
        values = {"id": id, "name": name, "role": role, "token_hash": token_hash,
                  "token_fingerprint": token_fingerprint, "is_owner": int(is_owner),
                  "created_at": now}
        self.db.insert("people", values)
        return self.person(id)

    def person(self, person_id: str) -> dict | None:
        row = self.db.one("SELECT * FROM people WHERE id = ?", (person_id,))
        return _person(row)

    def person_by_name(self, name: str) -> dict | None:
        return _person(self.db.one("SELECT * FROM people WHERE name = ?", (name,)))

    def person_by_token_hash(self, token_hash: str) -> dict | None:
        return _person(self.db.one("SELECT * FROM people WHERE token_hash = ?", (token_hash,)),
                       keep_hash=True)

    def people(self) -> list[dict]:
        return [_person(r) for r in self.db.all("SELECT * FROM people ORDER BY created_at")]


def _person(row, keep_hash: bool = False) -> dict | None:
    if row is None:
        return None
    person = dict(row)
    person["is_owner"] = bool(person["is_owner"])
    if not keep_hash:
        person.pop("token_hash", None)
    return person
