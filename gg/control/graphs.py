"""Work graphs: many flights opened in one transaction (``gg fly --file``), and the graph a
flight belongs to (``gg flights --graph F``, the web console); docs/work-graphs.md.

A graph opens all or none: its flights are opened in an order where each comes after the
flights it needs, by :func:`gg.control.flights.open_flight` itself (each flight is checked
and settled as a single ``gg fly`` is, its needs turned into ``--after``), inside ONE
``store.atomic()`` block. Run by the writer, that block is one savepoint of the group
commit: if any flight is refused, every flight opened before it in the graph is rolled
back with it, its held signals are dropped, and the refusal names the flight.
"""

from __future__ import annotations

from dataclasses import replace

from gg.control import flights as flight_ops
from gg.control.core import Core
from gg.domain import graphs as rules
from gg.domain.dependencies import distinct
from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import Flight
from gg.domain.graphs import GraphFlight
from gg.domain.people import Person
from gg.errors import BadRequest, GGError, NotFound


def open_graph(core: Core, person: Person, flights: list[GraphFlight]) -> list[tuple[str, Flight]]:
    """Open every flight of the graph, or none; (name, flight) in the order given."""
    names = [f.name for f in flights]
    needs = {f.name: f.needs for f in flights}
    if problem := rules.problem(names, needs):
        raise BadRequest(problem)
    by_name = {f.name: f for f in flights}
    opened: dict[str, Flight] = {}
    with core.store.atomic():
        for name in rules.order(names, needs):
            asked = by_name[name]
            after = distinct([opened[n].id for n in asked.needs] + list(asked.spec.after))
            spec = replace(asked.spec, title=asked.spec.title or name, after=tuple(after))
            if spec.artifacts is not None and spec.artifacts.inputs:  # $GG_INPUTS/<need>/
                spec = replace(spec, artifacts=replace(spec.artifacts, names=tuple(
                    (opened[n].id, n) for n in asked.needs)))
            try:
                opened[name] = flight_ops.open_flight(core, person, spec)
            except GGError as exc:  # the whole graph is refused: say which flight and why
                exc.message = f"flight {name}: {exc.message}"
                exc.args = (exc.message,)
                raise
    return [(name, opened[name]) for name in names]


def graph_of(core: Core, flight_id: str) -> dict:
    """The graph ``flight_id`` belongs to: every flight linked to it by dependencies either
    way (at most MAX_GRAPH_SHOWN), oldest first, and the lines that draw it."""
    if core.store.flight(flight_id) is None:
        raise NotFound(f"no flight {flight_id}")
    seen = {flight_id}
    after: dict[str, list[str]] = {}
    frontier = [flight_id]
    truncated = False
    while frontier:
        found: list[str] = []
        for dependent, dependency in core.store.dependency_edges(frontier):
            if dependency not in after.setdefault(dependent, []):
                after[dependent].append(dependency)
            for linked in (dependent, dependency):
                if linked not in seen:
                    if len(seen) >= rules.MAX_GRAPH_SHOWN:
                        truncated = True
                        continue
                    seen.add(linked)
                    found.append(linked)
        frontier = found
    rows = core.store.graph_flights(sorted(seen))
    ids = [d.id for d, _ in rows]
    present = set(ids)
    nodes = [_read(d, _NODE) | {"after": [a for a in after.get(d.id, []) if a in present],
                                "after_any": any_end} for d, any_end in rows]
    lines = [{"depth": depth, "id": node, "repeated": repeated}
             for depth, node, repeated in rules.tree(ids, after)]
    return {"flight": flight_id, "nodes": nodes, "lines": lines, "truncated": truncated}


def asked(body: dict) -> list[GraphFlight]:
    """The graph a validated ``GraphOpen`` body asks for (``model_dump()``)."""
    return [GraphFlight(name=f["name"], needs=tuple(f["needs"]),
                        spec=FlightSpec.from_wire({k: v for k, v in f.items()
                                                   if k not in ("name", "needs")}))
            for f in body["flights"]]


async def opened(core: Core, person: Person, flights: list[GraphFlight]) -> dict:
    """Open the graph on the writer (one unit of a group commit: one transaction); each
    flight's name and row once it is durable."""
    pairs = await core.run(open_graph, person, flights)
    return {"flights": [{"name": name} | _read(f, _OPENED) for name, f in pairs]}


_NODE = ("id", "title", "stage", "ended_reason")  # gg.api.graphs.GraphNode
_OPENED = ("id", "stage", "title")  # gg.api.graphs.GraphOpened


def _read(value, names: tuple[str, ...]) -> dict:
    """The fields ``names`` of a flight read from the store, as its answer carries them."""
    return {name: getattr(value, name) for name in names}
