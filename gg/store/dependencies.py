"""Dependencies between flights (``--after``): the rows of migration 930, read both ways."""

from __future__ import annotations

from gg.domain.dependencies import Dependency
from gg.domain.flights import Flight
from gg.store.db import Database
from gg.store.flights import flight_from_row

_VIEW = "id, title, stage, ended_reason, opened_by, lease_runner"


def _dependency(row) -> Dependency:
    return Dependency(id=row["id"], title=row["title"], stage=row["stage"],
                      ended_reason=row["ended_reason"], opened_by=row["opened_by"],
                      lease_runner=row["lease_runner"])


class DependencyRows:
    db: Database

    def add_dependencies(self, flight_id: str, dependency_ids: list[str], *, any_end: bool,
                         held: bool) -> None:
        self.db.insert("flight_after", {"flight_id": flight_id, "any_end": int(any_end),
                                        "held": int(held)})
        for position, dependency_id in enumerate(dependency_ids):
            self.db.insert("flight_dependencies", {"flight_id": flight_id,
                                                   "dependency_id": dependency_id,
                                                   "position": position})

    def dependency_flights(self, flight_ids: list[str]) -> dict[str, Dependency]:
        """The flights among ``flight_ids`` that exist, as their dependents read them."""
        if not flight_ids:
            return {}
        marks = ",".join("?" * len(flight_ids))
        rows = self.db.all(f"SELECT {_VIEW} FROM flights WHERE id IN ({marks})",
                           tuple(flight_ids))
        return {r["id"]: _dependency(r) for r in rows}

    def after_of(self, flight_id: str) -> tuple[bool, bool] | None:
        """(any_end, held) of a flight opened with ``--after``; None for any other."""
        row = self.db.one("SELECT any_end, held FROM flight_after WHERE flight_id = ?",
                          (flight_id,))
        return (bool(row[0]), bool(row[1])) if row else None

    def dependencies_of(self, flight_id: str) -> list[Dependency]:
        """The flight's dependencies, in the order given (one pruned by retention is gone)."""
        rows = self.db.all(
            f"SELECT {', '.join('f.' + c for c in _VIEW.split(', '))} FROM flight_dependencies "
            "AS d JOIN flights AS f ON f.id = d.dependency_id WHERE d.flight_id = ? "
            "ORDER BY d.position", (flight_id,))
        return [_dependency(r) for r in rows]

    def dependents_of(self, flight_id: str) -> list[Dependency]:
        """The flights opened ``--after`` this one, oldest first."""
        rows = self.db.all(
            f"SELECT {', '.join('f.' + c for c in _VIEW.split(', '))} FROM flight_dependencies "
            "AS d JOIN flights AS f ON f.id = d.flight_id WHERE d.dependency_id = ? "
            "ORDER BY f.seq", (flight_id,))
        return [_dependency(r) for r in rows]

    def waiting_dependents(self, flight_id: str) -> list[tuple[Flight, bool]]:
        """The dependents of ``flight_id`` that have not ended, with whether any ending of
        their dependencies will do: what its ending may release or cancel."""
        rows = self.db.all(
            "SELECT f.*, a.any_end AS after_any FROM flight_dependencies AS d "
            "JOIN flights AS f ON f.id = d.flight_id "
            "JOIN flight_after AS a ON a.flight_id = d.flight_id "
            "WHERE d.dependency_id = ? AND f.stage IN ('gated', 'ready') ORDER BY f.seq",
            (flight_id,))
        return [(flight_from_row(r), bool(r["after_any"])) for r in rows]

    def release_dependent(self, flight_id: str) -> bool:
        """No dependency holds it back any more: the claim may offer it."""
        cur = self.db.run("UPDATE flight_after SET held = 0 WHERE flight_id = ? AND held = 1",
                          (flight_id,))
        return cur.rowcount == 1

    def held_flights(self) -> set[str]:
        """Every flight a dependency still holds back (read once per listing)."""
        return {r[0] for r in self.db.all("SELECT flight_id FROM flight_after WHERE held = 1")}

    # -- work graphs (gg flights --graph): the edges around some flights, read both ways

    def dependency_edges(self, flight_ids: list[str]) -> list[tuple[str, str]]:
        """(dependent, dependency) for every edge touching one of ``flight_ids``, each
        dependent's in the order given."""
        rows = self.db.all_in("SELECT flight_id, dependency_id FROM flight_dependencies "
                              "WHERE flight_id IN ({ids}) OR dependency_id IN ({ids}) "
                              "ORDER BY flight_id, position", flight_ids)
        return list(dict.fromkeys((r[0], r[1]) for r in rows))

    def graph_flights(self, flight_ids: list[str]) -> list[tuple[Dependency, bool]]:
        """The flights among ``flight_ids`` that exist, oldest first, each with whether any
        ending of its dependencies will do."""
        rows = self.db.all_in(
            f"SELECT {', '.join('f.' + c for c in _VIEW.split(', '))}, f.seq AS seq, "
            "a.any_end AS any_end FROM flights AS f "
            "LEFT JOIN flight_after AS a ON a.flight_id = f.id WHERE f.id IN ({ids})", flight_ids)
        return [(_dependency(r), bool(r["any_end"])) for r in sorted(rows, key=lambda r: r["seq"])]
