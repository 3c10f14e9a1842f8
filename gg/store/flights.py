"""Flights, lease grants and facts. Every change of stage is one compare-and-set statement."""

from __future__ import annotations

import dataclasses
from typing import Any

from gg.domain.flights import Change, Flight, Stage
from gg.store.db import Database, dumps, loads
from gg.store.placement import FIRST_UNTAKEN_ATTENDED, UNTAKEN_STAGES

_JSON = ("command", "requires", "gates", "where")
_ORDER = tuple(f.name for f in dataclasses.fields(Flight))
_FIELDS = set(_ORDER)


def _decode(data: dict) -> dict:
    """A flights row as a dict of Flight fields (in place). Listing 10,000 flights decodes
    10,000 of these, so the common empty values skip the JSON decoder and unknown columns
    are dropped with one set difference."""
    for extra in data.keys() - _FIELDS:
        del data[extra]
    for key in _JSON:
        text = data.get(key)
        if text == "[]":
            data[key] = []
        elif text == "{}":
            data[key] = {}
        else:
            data[key] = loads(text, {} if key in ("requires", "where") else [])
    data["attended"] = bool(data.get("attended"))
    if data.get("service") is not None:
        data["service"] = loads(data["service"], None)
    return data


def flight_from_row(row) -> Flight:
    return Flight(**_decode(dict(row)))


def _encode(values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in values.items():
        if key in _JSON:
            value = dumps(value)
        elif key == "attended":
            value = int(bool(value))
        elif key == "service" and value is not None:
            value = dumps(value)
        out[key] = value
    return out


# The earliest lease's expiry and the earliest delayed retry's offer: two columns a read of
# what falls due next starts with
_NEXT_DUE = ("(SELECT min(lease_expires_at) FROM flights WHERE stage = 'flying'), "
             "(SELECT min(offer_at) FROM flight_retries WHERE held = 1)")

# A ready flight a dependency still holds back (``--after``, gg.store.dependencies), or a
# retry whose delay runs (gg.store.retries), is not offered: the claim's reads of ``flights``
# add this (primary-key look-ups of the row's id).
NOT_HELD = ("NOT EXISTS (SELECT 1 FROM flight_after AS h WHERE h.flight_id = flights.id "
            "AND h.held = 1) AND NOT EXISTS (SELECT 1 FROM flight_retries AS rh "
            "WHERE rh.flight_id = flights.id AND rh.held = 1)")

# Each (priority, opener)'s head: SQLite reads it as a bounded range of ``flights_turns`` per
# pair; PostgreSQL plans that IN as a filter on every row of ``flights`` (a claim's cost then
# grows with every flight ever opened: 18 ms with 3,000), so it is told the same as a LATERAL
# join, which it runs as one short index range per pair (1 ms).
_HEADS_IN = ("SELECT f.*, served.at AS served_at FROM served JOIN flights AS f ON f.seq IN ("
             "  SELECT seq FROM flights WHERE stage = 'ready' AND priority = served.p "
             f"  AND opened_by = served.o AND {NOT_HELD} ORDER BY seq LIMIT ?) ")
_HEADS_LATERAL = ("SELECT f.*, served.at AS served_at FROM served CROSS JOIN LATERAL ("
                  "  SELECT * FROM flights WHERE stage = 'ready' AND priority = served.p "
                  f"  AND opened_by = served.o AND {NOT_HELD} ORDER BY seq LIMIT ?) AS f ")


def _earliest(*times: float | None) -> float | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


class FlightRows:
    db: Database

    def insert_flight(self, flight: Flight) -> None:
        # A shallow copy: _encode writes the containers as JSON text, and asdict's deep copy
        # of every value was half of an open's time on the writer.
        self.db.insert("flights", _encode({name: getattr(flight, name) for name in _ORDER}))

    def set_flight_limits(self, flight_id: str, limits: dict[str, Any]) -> None:
        """The resource limits a flight asked for (gg.domain.limits); written at its open."""
        self.db.run("INSERT INTO flight_limits (flight_id, limits) VALUES (?, ?)",
                    (flight_id, dumps(limits)))

    def grant_reads(self, runner_id: str, flight_id: str) -> tuple[dict | None, dict[str, Any],
                                                                  float | None, bool, bool]:
        """What a claim's answer reads besides the flight, in one statement: the runner's
        policy in force (None: no such runner), the flight's limits (``{}``: none asked),
        its grace (None: none set), and whether it asked for secrets and is handed inputs
        (each then read on its own; most flights ask neither)."""
        row = self.db.one(
            "SELECT (SELECT policy FROM runners WHERE id = ?), "
            "(SELECT limits FROM flight_limits WHERE flight_id = ?), "
            "(SELECT grace FROM flight_grace WHERE flight_id = ?), "
            "EXISTS (SELECT 1 FROM flight_secrets WHERE flight_id = ?), "
            "EXISTS (SELECT 1 FROM flight_inputs WHERE flight_id = ?)",
            (runner_id, flight_id, flight_id, flight_id, flight_id))
        assert row is not None, "a SELECT of scalar subqueries answers one row"
        policy = loads(row[0], {}) if row[0] is not None else None
        grace = float(row[2]) if row[2] is not None else None
        return policy, loads(row[1], {}), grace, bool(row[3]), bool(row[4])

    def flight_limits(self, flight_id: str) -> dict[str, Any]:
        """What ``set_flight_limits`` wrote, or ``{}`` (it asked none)."""
        row = self.db.one("SELECT limits FROM flight_limits WHERE flight_id = ?", (flight_id,))
        return loads(row[0], {}) if row else {}

    def limits_of(self, flight_ids: list[str]) -> dict[str, dict[str, Any]]:
        """flight id -> the limits it asked (``set_flight_limits``), for those of
        ``flight_ids`` that asked any: primary-key look-ups (placement by size)."""
        rows = self.db.all_in("SELECT flight_id, limits FROM flight_limits WHERE flight_id "
                              "IN ({ids})", flight_ids) if flight_ids else []
        return {r[0]: loads(r[1], {}) for r in rows}

    def flying_limits(self, now: float,
                      runner_ids: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
        """runner id -> the limits each flight it flies under a live lease asked (``{}`` for
        one that asked none): a runner's room is its size less these (gg.domain.sizes).
        The runner's flying flights through ``flights_holder``, each one's limits by key."""
        if runner_ids is not None and not runner_ids:
            return {}
        sql, params = _of_runners(
            "SELECT f.lease_runner, l.limits FROM flights AS f LEFT JOIN flight_limits AS l "
            "ON l.flight_id = f.id WHERE f.stage = 'flying' AND f.lease_expires_at > ?",
            [now], runner_ids, column="f.lease_runner")
        out: dict[str, list[dict[str, Any]]] = {}
        for runner_id, limits in self.db.all(sql, tuple(params)):
            out.setdefault(runner_id, []).append(loads(limits, {}) if limits else {})
        return out

    def set_flight_note(self, flight_id: str, note: str) -> None:
        """A flight's note (``gg fly --note``); written at its open."""
        self.db.run("INSERT INTO flight_notes (flight_id, note) VALUES (?, ?)", (flight_id, note))

    def flight_note(self, flight_id: str) -> str | None:
        row = self.db.one("SELECT note FROM flight_notes WHERE flight_id = ?", (flight_id,))
        return row[0] if row else None

    def flight(self, flight_id: str) -> Flight | None:
        row = self.db.one("SELECT * FROM flights WHERE id = ?", (flight_id,))
        return flight_from_row(row) if row else None

    def update_flight(self, flight_id: str, **values: Any) -> int:
        """Set fields other than the stage (a stage changes only by apply_flight_change)."""
        if "stage" in values:
            raise ValueError("a flight's stage changes only through apply_flight_change")
        return self.db.update("flights", "id", flight_id, _encode(values))

    def flights(self, *, stages: tuple[str, ...] | None = None, limit: int = 1000,
                newest_first: bool = True) -> list[Flight]:
        sql = "SELECT * FROM flights"
        params: list[Any] = []
        if stages:
            sql += f" WHERE stage IN ({','.join('?' * len(stages))})"
            params.extend(stages)
        sql += " ORDER BY seq " + ("DESC" if newest_first else "ASC") + " LIMIT ?"
        params.append(limit)
        return [flight_from_row(r) for r in self.db.all(sql, tuple(params))]

    def flight_values(self, *, stages: tuple[str, ...] | None = None, limit: int = 1000,
                      before_seq: int | None = None, with_seq: bool = False) -> list[dict]:
        """Newest first, as plain dicts of Flight fields: what a listing serialises, without
        building a Flight per row (``Flight(**values)`` makes one when a rule needs it). With
        ``with_seq`` each dict also has ``_seq``, the row's place in the listing; ``before_seq``
        starts the page after that place (the listing's cursor)."""
        names = sorted(_FIELDS)  # every Flight field is a column (insert_flight writes them)
        columns = ", ".join('"' + n + '"' for n in names)  # quoted: "group" is a keyword
        sql = f"SELECT {columns}, seq FROM flights"
        where: list[str] = []
        params: list[Any] = []
        if stages:
            where.append(f"stage IN ({','.join('?' * len(stages))})")
            params.extend(stages)
        if before_seq is not None:
            where.append("seq < ?")
            params.append(before_seq)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC LIMIT ?"
        params.append(limit)
        requires: dict[str, dict] = {}  # few distinct requirement sets: decode each once
        out = []
        # plain tuples: a row object -> dict costs more than zip
        for row in self.db.tuples(sql, tuple(params)):
            data = dict(zip(names, row, strict=False))  # with_seq: seq comes last
            if with_seq:
                data["_seq"] = row[-1]
            text = data["requires"]
            if text not in requires:
                requires[text] = loads(text, {})
            data["requires"] = dict(requires[text])
            data["command"] = loads(data["command"], [])
            gates = data["gates"]
            data["gates"] = [] if gates == "[]" else loads(gates, [])
            if data["service"] is not None:
                data["service"] = loads(data["service"], None)
            data["where"] = {} if data["where"] == "{}" else loads(data["where"], {})
            data["attended"] = bool(data["attended"])
            out.append(data)
        return out

    def ready_turns(self, depth: int) -> tuple[list[Flight], dict[str, float], set[str]]:
        """The oldest ``depth`` ready flights of each (priority, opener), oldest first; when
        each of those openers was last granted a flight; and the priorities of the groups
        that hold more than ``depth``. One statement: the distinct (priority, opener) pairs
        are read from ``flights_turns``, and each pair's head is a bounded range of it, so a
        burst of 10,000 from one person costs one short range, not a walk."""
        rows = self.db.all(
            "WITH heads AS (SELECT DISTINCT priority AS p, opened_by AS o FROM flights "
            "  WHERE stage = 'ready'), "
            "served AS (SELECT p, o, (SELECT max(lease_granted_at) FROM flights "
            "  WHERE opened_by = heads.o) AS at FROM heads) "
            + (_HEADS_LATERAL if self.db.dialect == "postgresql" else _HEADS_IN)
            + "ORDER BY f.seq", (depth + 1,))
        counts: dict[tuple[str, str], int] = {}
        flights, served, deeper = [], {}, set()
        for row in rows:
            group = (row["priority"], row["opened_by"])
            counts[group] = counts.get(group, 0) + 1
            if row["served_at"] is not None:
                served[row["opened_by"]] = row["served_at"]
            if counts[group] > depth:
                deeper.add(row["priority"])
            else:
                flights.append(flight_from_row(row))
        return flights, served, deeper

    def ready_kinds(self, priorities: tuple[str, ...]) -> list[tuple[Flight, int]]:
        """Ready flights of ``priorities``, one per kind the matcher tells apart (priority,
        requirements, target, opener, repository, agent, kind), with how many share it."""
        if not priorities:
            return []
        rows = self.db.all(  # each kind's oldest flight stands for it
            "SELECT f.*, k.how_many FROM flights AS f JOIN (SELECT min(seq) AS seq, "
            f"count(*) AS how_many FROM flights WHERE stage = 'ready' AND {NOT_HELD} "
            f"AND priority IN ({','.join('?' * len(priorities))}) "
            "GROUP BY priority, requires, runner_target, opened_by, repo, agent, kind, "
            '"group", "where", environment) AS k ON f.seq = k.seq ORDER BY f.seq',
            tuple(priorities))
        return [(flight_from_row(r), r["how_many"]) for r in rows]

    def any_ready(self) -> bool:
        return self.db.one(f"SELECT 1 FROM flights WHERE stage = 'ready' AND {NOT_HELD} "
                           "LIMIT 1") is not None

    def expired_leases(self, now: float, limit: int = 500) -> list[Flight]:
        rows = self.db.all(
            "SELECT * FROM flights WHERE stage = 'flying' AND lease_expires_at <= ? "
            "ORDER BY lease_expires_at LIMIT ?", (now, limit))
        return [flight_from_row(r) for r in rows]

    def offer_state(self) -> tuple[float | None, bool]:
        """:meth:`next_lease_expiry` and :meth:`any_ready` in one read."""
        row = self.db.one(f"SELECT {_NEXT_DUE}, EXISTS (SELECT 1 FROM flights WHERE stage = "
                          f"'ready' AND {NOT_HELD})")
        return (_earliest(row[0], row[1]), bool(row[2])) if row else (None, False)

    def next_looks(self) -> tuple[float | None, float | None]:
        """:meth:`next_lease_expiry`, and when the oldest attended flight nobody took yet was
        opened (``first_untaken_attended``), in one read: what a dispatch pass and a listing
        check before they look for anything due."""
        row = self.db.one(f"SELECT {_NEXT_DUE}, {FIRST_UNTAKEN_ATTENDED}", UNTAKEN_STAGES)
        return (_earliest(row[0], row[1]), row[2]) if row else (None, None)

    def next_lease_expiry(self) -> float | None:
        """When something is next due for a look: the earliest lease's expiry, or a delayed
        retry's time to be offered (gg.store.retries), whichever comes first."""
        row = self.db.one(f"SELECT {_NEXT_DUE}")
        return _earliest(row[0], row[1]) if row else None

    def apply_flight_change(self, flight_id: str, expected_stage: str, expected_epoch: int,
                            change: Change, *, pass_by: bool = False) -> bool:
        """Apply ``change`` (from ``gg.domain.flights.transition``) only if the flight is
        still at ``expected_stage`` and ``expected_epoch``: one conditional UPDATE, the only
        statement that writes a flight's stage. A new lease is remembered in ``grants``.
        False when the flight moved on meanwhile (nothing is written). ``pass_by`` (a grant,
        an expiry: what the control plane offers, not what someone asked): on PostgreSQL a
        flight another replica's writer holds is passed by at once (``FOR UPDATE SKIP
        LOCKED``, False) instead of waited for; otherwise the UPDATE waits for that writer
        and then compares with what it committed."""
        values = _encode({**change.values, "stage": Stage(change.to).value})
        which = "id = ?"
        if pass_by and self.db.dialect == "postgresql":
            which = "id = (SELECT id FROM flights WHERE id = ? FOR UPDATE SKIP LOCKED)"
        cur = self.db.run(
            f"UPDATE flights SET {', '.join(f'{k} = ?' for k in values)} "
            f"WHERE {which} AND stage = ? AND epoch = ?",
            (*values.values(), flight_id, Stage(expected_stage).value, expected_epoch))
        if cur.rowcount != 1:
            return False
        if change.grant is not None:
            self.db.insert("grants", {"flight_id": flight_id, "epoch": change.grant.epoch,
                                      "runner_id": change.grant.runner_id,
                                      "granted_at": change.grant.granted_at})
        return True

    def flight_held(self, flight_id: str, runner_id: str) -> tuple[Flight | None, set[int]]:
        """The flight (None: no such flight) and the epochs at which ``runner_id`` was granted
        it, in one read: what every lease call checks its caller against."""
        rows = self.db.all("SELECT f.*, g.epoch AS held_epoch FROM flights AS f LEFT JOIN grants "
                           "AS g ON g.flight_id = f.id AND g.runner_id = ? WHERE f.id = ?",
                           (runner_id, flight_id))
        if not rows:
            return None, set()
        return (flight_from_row(rows[0]),
                {r["held_epoch"] for r in rows if r["held_epoch"] is not None})

    def grants(self, flight_id: str) -> list[dict]:
        return [dict(r) for r in self.db.all(
            "SELECT * FROM grants WHERE flight_id = ? ORDER BY epoch", (flight_id,))]

    def live_leases(self, now: float, runner_ids: list[str] | None = None) -> dict[str, int]:
        if runner_ids is not None and not runner_ids:
            return {}
        sql, params = _of_runners("SELECT lease_runner, count(*) FROM flights WHERE stage = "
                                  "'flying' AND lease_expires_at > ?", [now], runner_ids)
        sql += " GROUP BY lease_runner"
        return {r[0]: r[1] for r in self.db.all(sql, tuple(params))}

    def held_service_ports(self, now: float,
                           runner_ids: list[str] | None = None) -> dict[str, dict[int, str]]:
        """runner id -> {a service's --port: that service's flight id}, for every service
        flying under a live lease (gg.domain.matching.Seat.held_ports)."""
        if runner_ids is not None and not runner_ids:
            return {}
        sql, params = _of_runners("SELECT lease_runner, id, service FROM flights WHERE stage = "
                                  "'flying' AND kind = 'service' AND lease_expires_at > ?",
                                  [now], runner_ids)
        held: dict[str, dict[int, str]] = {}
        for runner_id, flight_id, spec in self.db.all(sql, tuple(params)):
            port = (loads(spec, None) or {}).get("port") if spec else None
            if port is not None:
                held.setdefault(runner_id, {})[int(port)] = flight_id
        return held

    def flights_held_by(self, runner_id: str) -> list[Flight]:
        rows = self.db.all("SELECT * FROM flights WHERE lease_runner = ? AND stage = 'flying'",
                           (runner_id,))
        return [flight_from_row(r) for r in rows]

    def flights_held_by_any(self, runner_ids: list[str]) -> list[Flight]:
        """The flights any of ``runner_ids`` holds a lease on (a page of ``gg runners``)."""
        return [flight_from_row(r) for r in self.db.all_in(
            "SELECT * FROM flights WHERE stage = 'flying' AND lease_runner IN ({ids})",
            runner_ids)]

    def honour_leases_after_restart(self, now: float, ttl: float) -> int:
        cur = self.db.run(
            "UPDATE flights SET lease_expires_at = max(lease_expires_at, ?) WHERE stage = 'flying'",
            (now + ttl,))
        return cur.rowcount

    def stage_counts(self) -> dict[str, int]:
        return {r[0]: r[1] for r in self.db.all("SELECT stage, count(*) FROM flights GROUP BY stage")}

    # -- facts --------------------------------------------------------------------------

    def add_fact(self, *, flight_id: str, epoch: int, runner_id: str | None, kind: str,
                 body: dict, at: float, idem_key: str | None = None) -> bool:
        """Append a fact; False when this idempotency key was stored already."""
        cur = self.db.run(
            "INSERT INTO facts (flight_id, epoch, runner_id, kind, body, at, idem_key) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (flight_id, epoch, runner_id, kind, dumps(body), at, idem_key))
        return cur.rowcount == 1

    def facts(self, flight_id: str, *, after: int = 0, limit: int = 10000) -> list[dict]:
        rows = self.db.all(
            "SELECT seq, flight_id, epoch, runner_id, kind, body, at FROM facts "
            "WHERE flight_id = ? AND seq > ? ORDER BY seq LIMIT ?", (flight_id, after, limit))
        out = []
        for r in rows:
            fact = dict(r)
            fact["body"] = loads(fact["body"], {})
            out.append(fact)
        return out

    def fact_with_key(self, flight_id: str, idem_key: str) -> dict | None:
        row = self.db.one("SELECT kind, body, epoch FROM facts WHERE flight_id = ? AND idem_key = ?",
                          (flight_id, idem_key))
        return dict(row) if row else None


def _of_runners(sql: str, params: list[Any], runner_ids: list[str] | None,
                column: str = "lease_runner") -> tuple[str, list[Any]]:
    """``sql`` narrowed to the flights leased to ``runner_ids`` (None: every runner)."""
    if runner_ids is None:
        return sql, params
    return (sql + f" AND {column} IN ({','.join('?' * len(runner_ids))})",
            [*params, *runner_ids])
