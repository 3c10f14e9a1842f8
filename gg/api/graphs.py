"""Wire schemas of work graphs: many flights opened at once (``gg fly --file``), and the
graph a flight belongs to (``gg flights --graph F``); docs/work-graphs.md."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from gg.api.schemas import Answer, FlightOpen, Request
from gg.domain.flights import Stage
from gg.domain.graphs import MAX_GRAPH_FLIGHTS

GraphName = Annotated[str, StringConstraints(min_length=1, max_length=63)]


class GraphFlight(FlightOpen):
    """One flight of a graph: its name in the graph, the names of the graph's flights it
    needs (each becomes an ``after``), and everything ``POST /v1/flights`` takes (``after``
    names flights open already)."""
    name: GraphName
    needs: Annotated[list[GraphName], Field(max_length=MAX_GRAPH_FLIGHTS)] = []


class GraphOpen(Request):
    flights: Annotated[list[GraphFlight], Field(min_length=1, max_length=MAX_GRAPH_FLIGHTS)]


class GraphOpened(Answer):
    """A flight a graph opened: its name in the graph and its id, in the order given."""
    name: str
    id: str
    stage: Stage
    title: str = ""


class GraphOpenedList(Answer):
    flights: list[GraphOpened]


class GraphNode(Answer):
    """A flight of a drawn graph, with the ids of its dependencies in the graph."""
    id: str
    title: str = ""
    stage: Stage
    ended_reason: str | None = None
    after: list[str] = []
    after_any: bool = False


class GraphLine(Answer):
    """A line of the drawing, roots first: a flight at its depth (``repeated``: drawn in
    full above, under another of its dependencies)."""
    depth: int
    id: str
    repeated: bool = False


class FlightGraph(Answer):
    """The graph a flight belongs to: every flight linked to it by dependencies, either
    way, oldest first (``truncated`` when it held more than the drawing reads)."""
    flight: str
    nodes: list[GraphNode]
    lines: list[GraphLine]
    truncated: bool = False
