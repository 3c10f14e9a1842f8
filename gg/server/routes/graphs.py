"""Work graphs for people: many flights opened at once, and the graph a flight belongs to
(docs/work-graphs.md)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.api.graphs import FlightGraph, GraphOpen, GraphOpenedList
from gg.control import graphs
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.post(paths.GRAPHS, response_model=GraphOpenedList, status_code=201)
async def open_graph(body: GraphOpen, request: Request,
                     person: Person = Depends(auth.person)) -> dict:
    """Open every flight of the graph in one transaction, or none (the refusal names the
    flight); each flight's ``needs`` names flights of this graph."""
    return await graphs.opened(request.app.state.core, person, graphs.asked(body.model_dump()))


@router.get(paths.FLIGHT_GRAPH, response_model=FlightGraph)
async def flight_graph(flight_id: str, request: Request,
                       person: Person = Depends(auth.person)) -> dict:
    return await asyncio.to_thread(graphs.graph_of, request.app.state.core, flight_id)
