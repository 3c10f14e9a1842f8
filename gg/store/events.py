"""The append-only event feed."""

from __future__ import annotations

from typing import Callable

from gg.store.db import Database, dumps, loads


class EventRows:
    db: Database

    def add_event(self, kind: str, at: float, *, actor: str | None = None,
                  runner_id: str | None = None, flight_id: str | None = None,
                  body: dict | None = None, then: Callable[[int], None] | None = None) -> None:
        """An event of this transaction. Its seq is known only once its row is inserted (on
        PostgreSQL at the transaction's end, so that seq order is commit order,
        gg.store.event_order): ``then`` is handed it there, in the same transaction."""
        self.db.record_event({"kind": kind, "at": at, "actor": actor, "runner_id": runner_id,
                              "flight_id": flight_id, "body": dumps(body or {})}, then)

    def events(self, *, after: int = 0, kind: str | None = None, runner_id: str | None = None,
               flight_id: str | None = None, limit: int = 1000, newest: bool = False) -> list[dict]:
        where: list[str] = ["seq > ?"]
        params: list[int | str] = [after]
        if kind:
            if kind.endswith(("*", ":")) or kind.count(":") < 2:  # a prefix: warn:, info:runner:
                where.append("kind LIKE ?")
                params.append(kind.rstrip("*") + "%")
            else:
                where.append("kind = ?")
                params.append(kind)
        if runner_id:
            where.append("runner_id = ?")
            params.append(runner_id)
        if flight_id:
            where.append("flight_id = ?")
            params.append(flight_id)
        order = "DESC" if newest else "ASC"
        rows = self.db.all(
            f"SELECT * FROM events WHERE {' AND '.join(where)} ORDER BY seq {order} LIMIT ?",
            tuple(params) + (limit,))
        out = [dict(r) | {"body": loads(r["body"], {})} for r in rows]
        return list(reversed(out)) if newest else out
