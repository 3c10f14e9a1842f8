"""Flights for people: open, list, show, follow, cancel; and the event feed."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from gg.api import paths
from gg.api.schemas import FlightOpen
from gg.control import flights
from gg.errors import NotFound
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)
Wait = Annotated[float, Query(ge=0, le=60)]


@router.post(paths.FLIGHTS, status_code=201)
async def open_flight(body: FlightOpen, request: Request, person: dict = Depends(auth.person)) -> dict:
    core = request.app.state.core
    flight = flights.open_flight(core, person, command=body.command, title=body.title,
                                 environment=body.environment, runner=body.runner,
                                 labels=body.labels, attended=body.attended, repo=body.repo,
                                 agent=body.agent)
    return flights.show_flight(core, flight.id)


@router.get(paths.FLIGHTS, response_model=list[dict])
async def list_flights(request: Request, person: dict = Depends(auth.person),
                       stage: str | None = None,
                       limit: Annotated[int, Query(ge=1, le=100000)] = 200) -> Response:
    rows = flights.list_flights(request.app.state.core, stage=stage, limit=limit)
    # The rows are plain JSON values already; FastAPI's response validation of 10,000 of
    # them cost seconds (docs/performance-placement.md), json.dumps costs milliseconds.
    return Response(json.dumps(rows, separators=(",", ":")), media_type="application/json")


@router.get(paths.FLIGHT)
async def show_flight(flight_id: str, request: Request, person: dict = Depends(auth.person)) -> dict:
    return flights.show_flight(request.app.state.core, flight_id)


@router.get(paths.FLIGHT_FACTS)
async def follow_facts(flight_id: str, request: Request, person: dict = Depends(auth.person),
                       after: Annotated[int, Query(ge=0)] = 0, wait: Wait = 0) -> dict:
    """Facts after ``after``; with ``wait`` the request is held until one arrives or the flight ends."""
    core = request.app.state.core
    flight = core.store.flight(flight_id)
    if flight is None:
        raise NotFound(f"no flight {flight_id}")
    facts = core.store.facts(flight_id, after=after)
    if not facts and not flight.final and wait > 0:
        await request.app.state.watch.flight(flight_id, wait)
        facts = core.store.facts(flight_id, after=after)
        flight = core.store.flight(flight_id)
    return {"flight": flight_id, "stage": flight.stage, "exit_code": flight.exit_code,
            "outcome": flight.outcome, "facts": facts}


@router.post(paths.FLIGHT_CANCEL)
async def cancel(flight_id: str, request: Request, person: dict = Depends(auth.person)) -> dict:
    core = request.app.state.core
    flights.cancel(core, person, flight_id)
    return flights.show_flight(core, flight_id)


@router.get(paths.EVENTS)
async def events(request: Request, person: dict = Depends(auth.person),
                 after: Annotated[int, Query(ge=0)] = 0, kind: str | None = None,
                 runner: str | None = None, flight: str | None = None,
                 limit: Annotated[int, Query(ge=1, le=10000)] = 1000, wait: Wait = 0) -> list[dict]:
    core = request.app.state.core
    runner_id = None
    if runner:
        from gg.control.admin import runner_for_history
        runner_id = runner_for_history(core, runner)  # retired and forgotten runners too
    rows = core.store.events(after=after, kind=kind, runner_id=runner_id, flight_id=flight,
                             limit=limit, newest=after == 0 and wait == 0)
    if not rows and wait > 0:
        await request.app.state.watch.events(wait)
        rows = core.store.events(after=after, kind=kind, runner_id=runner_id, flight_id=flight,
                                 limit=limit)
    return rows
