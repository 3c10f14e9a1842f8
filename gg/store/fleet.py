"""Fleet profiles, enrolment tokens, enrolled runners and maintenance flights."""

from __future__ import annotations

from typing import Any

from gg.domain.enrolment import EnrolToken, ProfileRecord
from gg.domain.flights import Flight, Stage
from gg.domain.profiles import Profile
from gg.domain.runners import Runner
from gg.store.db import Database, dumps, loads
from gg.store.flights import flight_from_row
from gg.store.runners import runner_from_row

_TOKEN_COLUMNS = ("fingerprint", "profile", "uses", "uses_left", "expires_at", "created_at",
                  "created_by", "ownership", "owner", "revoked_at", "revoked_by", "ephemeral",
                  "group")


def _profile_record(row) -> ProfileRecord:
    in_force = loads(row["in_force"])
    return ProfileRecord(
        name=row["name"], version=row["version"], applied=Profile.from_dict(loads(row["applied"])),
        applied_at=row["applied_at"], applied_by=row["applied_by"],
        in_force=Profile.from_dict(in_force) if in_force else None,
        in_force_version=row["in_force_version"], narrowed_by=row["narrowed_by"],
        gate_id=row["gate_id"])


def _token(row) -> EnrolToken:
    values = {k: row[k] for k in _TOKEN_COLUMNS}
    values["ephemeral"] = bool(values["ephemeral"])
    return EnrolToken(**values)


class FleetRows:
    db: Database

    # -- profiles ---------------------------------------------------------------------------

    def profile_record(self, name: str) -> ProfileRecord | None:
        row = self.db.one("SELECT * FROM profiles WHERE name = ?", (name,))
        return _profile_record(row) if row else None

    def profile_records(self) -> list[ProfileRecord]:
        return [_profile_record(r) for r in self.db.all("SELECT * FROM profiles ORDER BY name")]

    def save_profile_record(self, record: ProfileRecord) -> None:
        values = {"name": record.name, "version": record.version,
                  "applied": dumps(record.applied.to_dict()), "applied_at": record.applied_at,
                  "applied_by": record.applied_by,
                  "in_force": dumps(record.in_force.to_dict()) if record.in_force else None,
                  "in_force_version": record.in_force_version,
                  "narrowed_by": record.narrowed_by, "gate_id": record.gate_id}
        self.db.run("INSERT INTO profiles (name, version, applied, applied_at, "
                    "applied_by, in_force, in_force_version, narrowed_by, gate_id) VALUES "
                    "(:name, :version, :applied, :applied_at, :applied_by, :in_force, "
                    ":in_force_version, :narrowed_by, :gate_id) ON CONFLICT (name) DO UPDATE SET "
                    "version = excluded.version, applied = excluded.applied, "
                    "applied_at = excluded.applied_at, applied_by = excluded.applied_by, "
                    "in_force = excluded.in_force, in_force_version = excluded.in_force_version, "
                    "narrowed_by = excluded.narrowed_by, gate_id = excluded.gate_id", values)

    def add_profile_version(self, name: str, version: int, body: dict, changes: list[dict],
                            gate_id: str | None, at: float, by: str | None) -> None:
        self.db.insert("profile_versions", {"name": name, "version": version,
                                            "body": dumps(body), "changes": dumps(changes),
                                            "gate_id": gate_id, "applied_at": at,
                                            "applied_by": by})

    def delete_profile(self, name: str) -> None:
        """The profile and its versions (a later apply of the name starts at version 1)."""
        self.db.run("DELETE FROM profile_versions WHERE name = ?", (name,))
        self.db.run("DELETE FROM profiles WHERE name = ?", (name,))

    def runners_with_profile(self, name: str) -> list[Runner]:
        rows = self.db.all("SELECT * FROM runners WHERE profile = ? AND retired_at IS NULL "
                           "ORDER BY created_at, id", (name,))
        return [runner_from_row(r) for r in rows]

    # -- enrolment tokens -------------------------------------------------------------------

    def insert_enrol_token(self, *, token_hash: str, token: EnrolToken) -> None:
        values: dict[str, Any] = {k: getattr(token, k) for k in _TOKEN_COLUMNS}
        values["token_hash"] = token_hash
        self.db.insert("enrol_tokens", values)

    def spend_enrol_token(self, token_hash: str, now: float) -> tuple[EnrolToken, str] | None:
        """Spend one use in ONE statement: the decrement happens only while the token is
        unexpired, unrevoked and has a use left, so concurrent exchanges can never spend
        more uses than it had. A token of ``uses = 0`` has no limit: nothing is decremented.
        Returns the token and its stored hash, or None."""
        row = self.db.one(
            "UPDATE enrol_tokens SET uses_left = CASE WHEN uses = 0 THEN 0 ELSE uses_left - 1 "
            "END WHERE token_hash = ? AND (uses = 0 OR uses_left > 0) AND expires_at > ? "
            "AND revoked_at IS NULL RETURNING *",
            (token_hash, now))
        return (_token(row), row["token_hash"]) if row else None

    def enrol_token(self, fingerprint: str) -> EnrolToken | None:
        row = self.db.one("SELECT * FROM enrol_tokens WHERE fingerprint = ?", (fingerprint,))
        return _token(row) if row else None

    def enrol_tokens(self, limit: int = 1000) -> list[EnrolToken]:
        rows = self.db.all("SELECT * FROM enrol_tokens ORDER BY created_at DESC LIMIT ?",
                           (limit,))
        return [_token(r) for r in rows]

    def revoke_enrol_token(self, fingerprint: str, now: float, by: str) -> int:
        cur = self.db.run("UPDATE enrol_tokens SET revoked_at = ?, revoked_by = ? "
                          "WHERE fingerprint = ? AND revoked_at IS NULL", (now, by, fingerprint))
        return cur.rowcount

    # -- maintenance flights ----------------------------------------------------------------

    def open_maintenance_flight(self, runner_id: str) -> Flight | None:
        row = self.db.one("SELECT * FROM flights WHERE kind = 'maintenance' AND "
                          "runner_target = ? AND stage IN (?, ?) ORDER BY seq DESC "
                          "LIMIT 1", (runner_id, Stage.GATED.value, Stage.READY.value))
        return flight_from_row(row) if row else None
