"""Durations of finished flights and pools' warm-ups, and the estimates flights started with."""

from __future__ import annotations

import json

from gg.domain.durations import Summary
from gg.domain.estimates import Waiting
from gg.domain.flights import Stage
from gg.store.db import Database
from gg.store.flights import NOT_HELD

SHOWN_A_STATEMENT = 500  # shown estimates written by one statement (5 values each)

FLIGHT, WARMUP = "flight", "warmup"
DURATIONS = "durations"  # what a write transaction holds for its end (gg.store.held)


class EstimateRows:
    db: Database

    def add_duration(self, what: str, key: tuple[str, str, str], seconds: float, *,
                     window: int, keep: int, now: float) -> None:
        """Fold one duration into its kind's summary at the end of the write transaction:
        every landing of a kind rewrites one row, so a group commit's landings are folded
        into it together, in one read and one write (gg.store.held: the row is never locked
        through the group's other units, and replicas never lose each other's folds)."""
        self.db.hold(DURATIONS, (what, key, seconds, window, keep, now))

    def fold_durations(self, held: list[tuple]) -> None:
        """A transaction's held durations, each kind's in the order they were held; at most
        ``keep`` kinds of each ``what`` are kept (the ones not updated longest are forgotten)."""
        kinds: dict[tuple[str, str, str, str], list[tuple]] = {}
        for what, key, seconds, window, keep, now in held:
            kinds.setdefault((what, *key), []).append((seconds, window, keep, now))
        for (what, title, environment, agent), durations in sorted(kinds.items()):
            row = self.db.one("SELECT weights FROM durations WHERE what = ? AND title = ? "
                              "AND environment = ? AND agent = ?",
                              (what, title, environment, agent))
            summary = Summary.from_json(row[0] if row else None)
            for seconds, window, _, _ in durations:
                summary = summary.add(seconds, window)
            _, _, keep, now = durations[-1]
            self.db.run(
                "INSERT INTO durations (what, title, environment, agent, weights, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (what, title, environment, agent) "
                "DO UPDATE SET weights = excluded.weights, updated_at = excluded.updated_at",
                (what, title, environment, agent, summary.to_json(), now))
            if row is None:  # a new kind: the table may have grown past its bound
                self.db.run(
                    "DELETE FROM durations WHERE rowid IN (SELECT rowid FROM durations WHERE "
                    "what = ? ORDER BY updated_at DESC LIMIT -1 OFFSET ?)", (what, keep))

    def durations(self, what: str) -> dict[tuple[str, str, str], Summary]:
        return {(r["title"], r["environment"], r["agent"]): Summary.from_json(r["weights"])
                for r in self.db.all("SELECT * FROM durations WHERE what = ?", (what,))}

    def show_estimates(self, shown: list[tuple[str, float, float, float, float]], *,
                       forget_before: float) -> None:
        """Keep the estimates just shown (flight id, shown at, at, low, high), each replacing
        the one its flight was shown before; shown estimates of flights that did not start
        and started ones, both older than ``forget_before``, are forgotten (index walks over
        the few that just aged out)."""
        self.db.run("DELETE FROM shown_estimates WHERE estimated_at < ?", (forget_before,))
        self.db.run("DELETE FROM start_estimates WHERE started_at < ?", (forget_before,))
        shown = list({values[0]: values for values in shown}.values())  # once a flight
        for at in range(0, len(shown), SHOWN_A_STATEMENT):  # a page's in one statement
            chunk = shown[at:at + SHOWN_A_STATEMENT]
            self.db.run(
                "INSERT INTO shown_estimates (flight_id, estimated_at, at, low, high) VALUES "
                + ", ".join(["(?, ?, ?, ?, ?)"] * len(chunk))
                + " ON CONFLICT (flight_id) DO UPDATE SET estimated_at = excluded.estimated_at, "
                "at = excluded.at, low = excluded.low, high = excluded.high",
                tuple(v for values in chunk for v in values))

    def started_with_estimate(self, flight_id: str, started_at: float) -> bool:
        """In a grant's transaction: the estimate ``flight_id`` was last shown (by any replica)
        moves beside its start. One statement when it was never shown."""
        row = self.db.run("DELETE FROM shown_estimates WHERE flight_id = ? "
                          "RETURNING estimated_at, at, low, high", (flight_id,)).fetchone()
        if row is None:
            return False
        self.db.run(
            "INSERT INTO start_estimates (flight_id, estimated_at, at, low, high, started_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (flight_id) DO UPDATE SET "
            "estimated_at = excluded.estimated_at, at = excluded.at, low = excluded.low, "
            "high = excluded.high, started_at = excluded.started_at",
            (flight_id, row[0], row[1], row[2], row[3], started_at))
        return True

    def start_estimates(self, since: float) -> list[dict]:
        return [dict(r) for r in self.db.all(
            "SELECT * FROM start_estimates WHERE started_at >= ? ORDER BY started_at",
            (since,))]

    def for_estimates(self, stage: str) -> list[dict]:
        """Every flight in ``stage`` (ready or flying), only the fields the matcher and the
        estimator read (the others keep their defaults): one listing plays the whole queue
        forward."""
        names = ("id", "opened_by", "opened_at", "stage", "title", "environment", "requires",
                 "runner_target", "repo", "agent", "kind", "priority", "attempt",
                 "lease_runner", "lease_granted_at", "group", "where")
        columns = ", ".join(f'"{n}"' for n in names)  # quoted: "group" and "where" are keywords
        decoded: dict[str, dict] = {}  # few distinct requirement sets: decode each once
        out = []
        for row in self.db.tuples(f"SELECT {columns} FROM flights WHERE stage = ?", (stage,)):
            data = dict(zip(names, row, strict=True))
            text = data["requires"]
            if text not in decoded:
                decoded[text] = json.loads(text or "{}")
            data["requires"] = decoded[text]
            where = data["where"]
            data["where"] = {} if not where or where == "{}" else json.loads(where)
            out.append(data)
        return out

    def ready_at_least(self, count: int) -> bool:
        """Whether at least ``count`` ready flights wait in the queue (no more are counted)."""
        row = self.db.one("SELECT count(*) FROM (SELECT 1 FROM flights WHERE stage = ? AND "
                          f"{NOT_HELD} LIMIT ?) AS q", (Stage.READY.value, count))
        return row is not None and row[0] >= count

    def waiting_for_estimates(self) -> list[Waiting]:
        """Every ready flight no dependency holds (``--after``) as the estimator's run reads
        it: a tuple each, labels and ``where`` decoded once per distinct text (a listing plays
        the whole queue forward)."""
        rows = self.db.tuples("SELECT id, opened_by, opened_at, priority, coalesce(title, ''), "
                              'environment, agent, requires, runner_target, repo, kind, "group", '
                              f'"where" FROM flights WHERE stage = ? AND {NOT_HELD}',
                              (Stage.READY.value,))
        pairs: dict[str | None, tuple] = {None: (), "": (), "{}": ()}
        out = []
        make = Waiting._make
        for row in rows:
            requires, where = row[7], row[12]
            if requires not in pairs:
                pairs[requires] = tuple(sorted(json.loads(requires).items()))
            if where not in pairs:
                pairs[where] = tuple(sorted(json.loads(where).items()))
            out.append(make((*row[:7], pairs[requires], *row[8:12], pairs[where])))
        return out

    def last_served(self, openers: set[str]) -> dict[str, float]:
        """Opener -> when a flight of theirs was last granted (the matcher's fair share)."""
        out: dict[str, float] = {}
        for opener in openers:  # one walk of the index flights_served each
            row = self.db.one("SELECT max(lease_granted_at) FROM flights WHERE opened_by = ?",
                              (opener,))
            if row and row[0] is not None:
                out[opener] = row[0]
        return out

    def flight_environments(self, stage: str) -> dict[str, str]:
        """Flight id -> environment ('' for none) of every flight in ``stage``."""
        return {r[0]: r[1] or "" for r in self.db.all(
            "SELECT id, environment FROM flights WHERE stage = ?", (stage,))}
