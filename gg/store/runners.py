"""Runners, their tombstones, credential-renewal challenges and key-proof nonces."""

from __future__ import annotations

import dataclasses
from typing import Any

from gg.domain.identity import key_fingerprint
from gg.domain.runners import Runner
from gg.store.db import Database, dumps, loads

_JSON = ("labels", "inventory", "capabilities", "readings", "policy", "policy_override",
         "agents", "credential_refs", "profile_in_force")  # the last three: enrolment
_FIELDS = {f.name for f in dataclasses.fields(Runner)}
# Runners whose heartbeats one statement writes (5 parameters each: within SQLite's limit)
HEARTBEATS_PER_STATEMENT = 1000


def runner_from_row(row) -> Runner:
    data = dict(row)
    for key in _JSON:
        data[key] = loads(data.get(key), {})
    data["reserved"] = bool(data.get("reserved"))
    data["ephemeral"] = bool(data.get("ephemeral"))
    return Runner(**{k: v for k, v in data.items() if k in _FIELDS})


def _encode(values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in values.items():
        if key in _JSON:
            value = dumps(value)
        elif key in ("reserved", "ephemeral"):
            value = int(bool(value))
        out[key] = value
    return out


class RunnerRows:
    db: Database

    def insert_runner(self, runner: Runner, *, credential_hash: str | None,
                      credential_fingerprint: str | None) -> None:
        values = _encode(dataclasses.asdict(runner))
        values["credential_hash"] = credential_hash
        values["credential_fingerprint"] = credential_fingerprint
        values["public_key_fingerprint"] = key_fingerprint(runner.public_key)
        self.db.insert("runners", values)

    def update_runner(self, runner_id: str, **values: Any) -> int:
        encoded = _encode(values)
        if "public_key" in values:  # a pool member's next cycle brings a fresh key
            encoded["public_key_fingerprint"] = key_fingerprint(values["public_key"] or "")
        return self.db.update("runners", "id", runner_id, encoded)

    def record_heartbeats(self, beats: list[tuple[str, float, dict, str | None, float | None]]
                          ) -> int:
        """Many runners' heartbeats, each (runner id, last seen at, readings, peer address,
        checks confirmed at or None to keep them), written by one UPDATE per
        :data:`HEARTBEATS_PER_STATEMENT` runners (``UPDATE … FROM`` a ``VALUES`` list): the
        rows changed. One row per runner id (the caller keeps the newest)."""
        changed = 0
        for start in range(0, len(beats), HEARTBEATS_PER_STATEMENT):
            chunk = beats[start:start + HEARTBEATS_PER_STATEMENT]
            rows = ", ".join(["(?, CAST(? AS DOUBLE PRECISION), ?, ?,"
                              " CAST(? AS DOUBLE PRECISION))"] * len(chunk))
            params = tuple(v for rid, seen, readings, peer, checks in chunk
                           for v in (rid, seen, dumps(readings), peer, checks))
            changed += self.db.run(  # a VALUES list's columns are column1… in both stores
                "UPDATE runners SET last_seen_at = beat.column2, readings = beat.column3, "
                "peer_address = beat.column4, "
                "checks_at = COALESCE(beat.column5, runners.checks_at) "
                f"FROM (VALUES {rows}) AS beat WHERE runners.id = beat.column1", params).rowcount
        return changed

    def runner_by_fingerprint(self, fingerprint: str) -> Runner | None:
        """The runner whose key has this fingerprint, retired or not (one key, one row)."""
        row = self.db.one("SELECT * FROM runners WHERE public_key_fingerprint = ?",
                          (fingerprint,))
        return runner_from_row(row) if row else None

    def runner(self, runner_id: str) -> Runner | None:
        row = self.db.one("SELECT * FROM runners WHERE id = ?", (runner_id,))
        return runner_from_row(row) if row else None

    def runner_policy(self, runner_id: str) -> dict | None:
        """The runner's policy in force (None: no such runner): a claim's answer reads only
        this, not the whole row with its inventory and capabilities."""
        row = self.db.one("SELECT policy FROM runners WHERE id = ?", (runner_id,))
        return loads(row[0], {}) if row else None

    def runner_state(self, runner_id: str) -> tuple[str, bool] | None:
        """(admin state, ephemeral) of a runner, or None: what ending a lease looks at before
        it needs the whole row (a draining or ephemeral runner)."""
        row = self.db.one("SELECT admin_state, ephemeral FROM runners WHERE id = ?",
                          (runner_id,))
        return (row[0], bool(row[1])) if row else None

    def runners_named(self, name: str) -> list[Runner]:
        rows = self.db.all("SELECT * FROM runners WHERE name = ? AND retired_at IS NULL", (name,))
        return [runner_from_row(r) for r in rows]

    def runners_for_heartbeat(self, runner_ids: list[str]) -> dict[str, tuple[Runner, bool]]:
        """Each runner's fields that liveness and a claim's instruction read (the rest left at
        their defaults), and whether a capability report is on file, by id: one read by
        primary key per few hundred runners, with only the policy parsed, the cheap half of a
        check-in (the heartbeats a claim carries, judged together). A runner not found is
        absent."""
        found: dict[str, tuple[Runner, bool]] = {}
        for row in self.db.all_in(  # (all_in formats the SQL: its braces are doubled)
                "SELECT id, name, kind, admin_state, policy, last_seen_at, goodbye_at, retired_at,"
                " credential_expires_at, offline_noted_at, checks_at, policy_changed_at,"
                " ephemeral, (capabilities IS NOT NULL AND capabilities NOT IN ('', '{{}}', 'null'))"
                " AS has_caps FROM runners WHERE id IN ({ids})", runner_ids):
            data = dict(row)
            has_caps = bool(data.pop("has_caps"))
            data["policy"] = loads(data.get("policy"), {})
            data["ephemeral"] = bool(data["ephemeral"])
            found[data["id"]] = (Runner(**data), has_caps)
        return found

    def runner_names(self, runner_ids: list[str]) -> dict[str, str]:
        """The names of these runners, retired or not, by id (an id not found is absent)."""
        return {row["id"]: row["name"] for row in self.db.all_in(
            "SELECT id, name FROM runners WHERE id IN ({ids})", runner_ids)}

    def runner_by_key(self, public_key: str) -> Runner | None:
        row = self.db.one("SELECT * FROM runners WHERE public_key = ?", (public_key,))
        return runner_from_row(row) if row else None

    def runner_by_credential(self, credential_hash: str) -> tuple[Runner, str] | None:
        row = self.db.one("SELECT * FROM runners WHERE credential_hash = ?", (credential_hash,))
        return (runner_from_row(row), row["credential_hash"]) if row else None

    def runners(self, *, include_retired: bool = False, ids: list[str] | None = None,
                after: Runner | None = None, limit: int | None = None) -> list[Runner]:
        """Oldest first (registered, then id); ``after``: only the runners after that one in
        this order (a listing's next page), ``limit``: at most that many."""
        sql = "SELECT * FROM runners"
        where: list[str] = []
        params: list[Any] = []
        if not include_retired:
            where.append("retired_at IS NULL")
        if ids is not None:
            if not ids:
                return []
            where.append(f"id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        if after is not None:
            where.append("(created_at > ? OR (created_at = ? AND id > ?))")
            params.extend((after.created_at, after.created_at, after.id))
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [runner_from_row(r) for r in self.db.all(sql, tuple(params))]

    def silent_candidates(self, seen_before: float) -> list[Runner]:
        """Runners last seen before ``seen_before`` whose silence is not yet noted (a
        prefilter in SQL so a check-in never loads the whole fleet; the domain decides)."""
        rows = self.db.all(
            "SELECT * FROM runners WHERE retired_at IS NULL AND last_seen_at IS NOT NULL "
            "AND last_seen_at <= ? AND (goodbye_at IS NULL OR goodbye_at < last_seen_at) "
            "AND (offline_noted_at IS NULL OR offline_noted_at < last_seen_at)", (seen_before,))
        return [runner_from_row(r) for r in rows]

    def set_credential(self, runner_id: str, credential_hash: str | None,
                       fingerprint: str | None, expires_at: float | None) -> None:
        self.db.update("runners", "id", runner_id, {
            "credential_hash": credential_hash, "credential_fingerprint": fingerprint,
            "credential_expires_at": expires_at})

    def delete_runner(self, runner_id: str) -> None:
        self.db.run("DELETE FROM runners WHERE id = ?", (runner_id,))

    def tombstone(self, public_key: str, runner_id: str, now: float) -> None:
        self.db.run("INSERT INTO runner_tombstones (public_key, runner_id, at) VALUES (?, ?, ?) "
                    "ON CONFLICT (public_key) DO UPDATE SET runner_id = excluded.runner_id, "
                    "at = excluded.at", (public_key, runner_id, now))

    def tombstoned(self, public_key: str) -> bool:
        return self.db.one("SELECT 1 FROM runner_tombstones WHERE public_key = ?",
                           (public_key,)) is not None

    def add_challenge(self, nonce_hash: str, runner_id: str, expires_at: float) -> None:
        self.db.insert("runner_challenges", {"nonce_hash": nonce_hash, "runner_id": runner_id,
                                              "expires_at": expires_at})

    def take_challenge(self, nonce_hash: str, runner_id: str, now: float) -> bool:
        """Spend a challenge once; True if it existed, was this runner's and was unexpired."""
        self.db.run("DELETE FROM runner_challenges WHERE expires_at < ?", (now,))
        cur = self.db.run("DELETE FROM runner_challenges WHERE nonce_hash = ? AND runner_id = ?",
                          (nonce_hash, runner_id))
        return cur.rowcount == 1

    def spend_key_nonce(self, nonce_hash: str, purpose: str, public_key: str,
                        expires_at: float, now: float) -> bool:
        """Record a key-proof nonce as spent, until it expires; True if it was not spent
        before (spent ones that expired are dropped first: they are refused anyway)."""
        self.db.run("DELETE FROM key_nonces WHERE expires_at <= ?", (now,))
        cur = self.db.run("INSERT INTO key_nonces (nonce_hash, purpose, public_key, expires_at) "
                          "VALUES (?, ?, ?, ?) ON CONFLICT(nonce_hash) DO NOTHING",
                          (nonce_hash, purpose, public_key, expires_at))
        return cur.rowcount == 1
