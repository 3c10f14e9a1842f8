"""Gates."""

from __future__ import annotations

import dataclasses

from gg.domain.flights import Stage
from gg.domain.gates import Gate
from gg.store.db import Database, dumps, loads

_FIELDS = {f.name for f in dataclasses.fields(Gate)}


def gate_from_row(row) -> Gate:
    data = dict(row)
    data["payload"] = loads(data.get("payload"), {})
    return Gate(**{k: v for k, v in data.items() if k in _FIELDS})


class GateRows:
    db: Database

    def insert_gate(self, gate: Gate) -> None:
        values = dataclasses.asdict(gate)
        values["payload"] = dumps(values["payload"])
        self.db.insert("gates", values)

    def gate(self, gate_id: str) -> Gate | None:
        row = self.db.one("SELECT * FROM gates WHERE id = ?", (gate_id,))
        return gate_from_row(row) if row else None

    def gates(self, *, status: str | None = "open", subject: str | None = None,
              runner_id: str | None = None, kind: str | None = None,
              limit: int = 1000) -> list[Gate]:
        where, params = [], []
        for column, value in (("status", status), ("subject", subject),
                              ("runner_id", runner_id), ("kind", kind)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = "SELECT * FROM gates" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY opened_at DESC, id LIMIT ?"
        return [gate_from_row(r) for r in self.db.all(sql, tuple(params) + (limit,))]

    def update_gate(self, gate_id: str, **values) -> int:
        if "payload" in values:
            values["payload"] = dumps(values["payload"])
        return self.db.update("gates", "id", gate_id, values)

    def open_gate_ids(self, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        rows = self.db.all(f"SELECT id FROM gates WHERE status = 'open' AND id IN "
                           f"({','.join('?' * len(ids))})", tuple(ids))
        return {r[0] for r in rows}

    def flights_behind(self, gate_id: str) -> list[str]:
        rows = self.db.all("SELECT flights.id FROM flights, json_each(flights.gates) "
                           "WHERE json_each.value = ? AND flights.stage IN (?, ?)",
                           (gate_id, Stage.GATED.value, Stage.READY.value))
        return [r[0] for r in rows]
