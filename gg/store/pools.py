"""Strategies, pool members and the pool maintainer allow-list."""

from __future__ import annotations

import dataclasses
from typing import Any

from gg.domain.flights import Stage
from gg.domain.pool_scaling import Scaled
from gg.domain.pools import PoolMember, StrategyRecord
from gg.domain.strategies import Strategy
from gg.store.db import Database, dumps, loads
from gg.store.flights import NOT_HELD

_MEMBER_FIELDS = {f.name for f in dataclasses.fields(PoolMember)}
_STRATEGIES = ("applied", "in_force")


def strategy_from_row(row) -> StrategyRecord:
    data = dict(row)
    data["applied"] = Strategy.from_dict(loads(data["applied"]))
    in_force = loads(data.get("in_force"))
    data["in_force"] = Strategy.from_dict(in_force) if in_force else None
    data["attestation"] = loads(data.get("attestation"))
    return StrategyRecord(**data)


def _encode_strategy(values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in values.items():
        if key in _STRATEGIES:
            value = dumps(value.to_dict()) if value is not None else None
        elif key == "attestation":
            value = dumps(value) if value is not None else None
        out[key] = value
    return out


def member_from_row(row) -> PoolMember:
    return PoolMember(**{k: v for k, v in dict(row).items() if k in _MEMBER_FIELDS})


class PoolRows:
    db: Database

    # -- strategies ---------------------------------------------------------------------

    def insert_strategy(self, record: StrategyRecord) -> None:
        values = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
        self.db.insert("strategies", _encode_strategy(values))

    def update_strategy(self, name: str, **values: Any) -> int:
        return self.db.update("strategies", "name", name, _encode_strategy(values))

    def strategy(self, name: str) -> StrategyRecord | None:
        row = self.db.one("SELECT * FROM strategies WHERE name = ?", (name,))
        return strategy_from_row(row) if row else None

    def delete_strategy(self, name: str) -> None:
        """The strategy, and the allow-list of its pool's maintainers."""
        row = self.db.one("SELECT pool FROM strategies WHERE name = ?", (name,))
        if row is not None:
            self.db.run("DELETE FROM pool_maintainers WHERE pool = ?", (row[0],))
            self.db.run("DELETE FROM pool_scaling WHERE pool = ?", (row[0],))
            self.db.run("DELETE FROM maintainer_checkins WHERE pool = ?", (row[0],))
        self.db.run("DELETE FROM strategies WHERE name = ?", (name,))

    def strategy_for_pool(self, pool: str) -> StrategyRecord | None:
        row = self.db.one("SELECT * FROM strategies WHERE pool = ?", (pool,))
        return strategy_from_row(row) if row else None

    def strategy_by_gate(self, gate_id: str) -> StrategyRecord | None:
        row = self.db.one("SELECT * FROM strategies WHERE gate_id = ?", (gate_id,))
        return strategy_from_row(row) if row else None

    def strategies(self, *, in_force: bool = False) -> list[StrategyRecord]:
        sql = "SELECT * FROM strategies"
        if in_force:
            sql += " WHERE in_force IS NOT NULL"
        return [strategy_from_row(r) for r in self.db.all(sql + " ORDER BY name")]

    # -- a scaled pool's desired count ------------------------------------------------------

    def pool_scaled(self, pool: str) -> tuple[Scaled, str | None] | None:
        """The pool's last scaling decision and its reason; None before the first."""
        row = self.db.one("SELECT desired, scaled_at, reason FROM pool_scaling WHERE pool = ?",
                          (pool,))
        return (Scaled(int(row[0]), row[1]), row[2]) if row else None

    def save_pool_scaled(self, pool: str, scaled: Scaled, reason: str | None) -> None:
        self.db.run(
            "INSERT INTO pool_scaling (pool, desired, scaled_at, reason) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(pool) DO UPDATE SET desired = excluded.desired, "
            "scaled_at = excluded.scaled_at, reason = excluded.reason",
            (pool, scaled.desired, scaled.scaled_at, reason))

    def maintainer_ids(self) -> frozenset[str]:
        """The runners allowed to maintain a pool, or maintaining one (an enrolled host whose
        profile has the maintain role): ``gg runner maintain`` processes, which fly nothing."""
        return frozenset(r[0] for r in self.db.all(
            "SELECT runner_id FROM pool_maintainers UNION "
            "SELECT maintainer_id FROM strategies WHERE maintainer_id IS NOT NULL"))

    # -- members ------------------------------------------------------------------------

    def insert_member(self, member: PoolMember) -> None:
        self.db.insert("members", dataclasses.asdict(member))

    def update_member(self, member_id: str, **values: Any) -> int:
        return self.db.update("members", "id", member_id, values)

    def delete_member(self, member_id: str) -> None:
        self.db.run("DELETE FROM members WHERE id = ?", (member_id,))

    def member(self, member_id: str) -> PoolMember | None:
        row = self.db.one("SELECT * FROM members WHERE id = ?", (member_id,))
        return member_from_row(row) if row else None

    def member_by_code(self, code_hash: str) -> PoolMember | None:
        row = self.db.one("SELECT * FROM members WHERE code_hash = ?", (code_hash,))
        return member_from_row(row) if row else None

    def member_of_runner(self, runner_id: str) -> PoolMember | None:
        row = self.db.one("SELECT * FROM members WHERE runner_id = ?", (runner_id,))
        return member_from_row(row) if row else None

    def members(self, pool: str) -> list[PoolMember]:
        rows = self.db.all("SELECT * FROM members WHERE pool = ? ORDER BY id", (pool,))
        return [member_from_row(r) for r in rows]

    def grants_to(self, runner_id: str) -> int:
        """How many leases ``runner_id`` was ever granted (a member's cycle starts counting
        from the number at its reset; clocks are never compared)."""
        row = self.db.one("SELECT count(*) FROM grants WHERE runner_id = ?", (runner_id,))
        assert row is not None, "count(*) answers one row"
        return row[0]

    # -- maintainers --------------------------------------------------------------------

    def allow_maintainer(self, pool: str, runner_id: str, allowed_by: str, now: float) -> None:
        self.db.run("INSERT INTO pool_maintainers (pool, runner_id, allowed_by, allowed_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (pool, runner_id) DO UPDATE SET "
                    "allowed_by = excluded.allowed_by, allowed_at = excluded.allowed_at",
                    (pool, runner_id, allowed_by, now))

    def maintainer_allowed(self, pool: str, runner_id: str) -> bool:
        return self.db.one("SELECT 1 FROM pool_maintainers WHERE pool = ? AND runner_id = ?",
                           (pool, runner_id)) is not None

    # -- several maintainers: each one's check-in ---------------------------------------------

    def check_in_maintainer(self, pool: str, runner_id: str, capacity: int | None,
                            now: float) -> None:
        """A maintainer asked for its share of the plan, saying how many members its host
        holds at most (None: no limit of its own)."""
        self.db.run(
            "INSERT INTO maintainer_checkins (pool, runner_id, capacity, checked_in_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (pool, runner_id) DO UPDATE SET "
            "capacity = excluded.capacity, checked_in_at = excluded.checked_in_at",
            (pool, runner_id, capacity, now))

    def note_maintainer_attested(self, pool: str, runner_id: str, attestation: dict,
                                 failing: bool, now: float) -> None:
        self.db.run(
            "INSERT INTO maintainer_checkins (pool, runner_id, failing, checked_in_at, "
            "attested_at, attestation) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (pool, runner_id) "
            "DO UPDATE SET failing = excluded.failing, attested_at = excluded.attested_at, "
            "attestation = excluded.attestation",
            (pool, runner_id, int(failing), now, now, dumps(attestation)))

    def maintainer_checkins(self, pool: str) -> list[dict[str, Any]]:
        """Every maintainer that ever checked in for ``pool``, by runner id: ``runner_id``,
        ``capacity``, ``failing``, ``checked_in_at``, ``attested_at``, ``attestation``."""
        rows = self.db.all("SELECT runner_id, capacity, failing, checked_in_at, attested_at, "
                           "attestation FROM maintainer_checkins WHERE pool = ? "
                           "ORDER BY runner_id", (pool,))
        return [{"runner_id": r[0], "capacity": r[1], "failing": bool(r[2]),
                 "checked_in_at": r[3], "attested_at": r[4], "attestation": loads(r[5])}
                for r in rows]

    # -- flights a member could take ------------------------------------------------------

    def count_ready_requiring(self, requires: dict[str, str]) -> int:
        """Ready flights that require exactly ``requires`` and were not sent to one runner
        (nor held by a dependency: no machine is warmed for them yet). Flights store
        ``requires`` canonically (``dumps``), so equality is exact."""
        row = self.db.one("SELECT count(*) FROM flights WHERE stage = ? AND "
                          f"runner_target IS NULL AND requires = ? AND {NOT_HELD}",
                          (Stage.READY.value, dumps(requires)))
        assert row is not None, "count(*) answers one row"
        return row[0]
