"""Flights for people: open, list, show, follow, cancel; and the event feed."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import TypeAdapter

from gg.api import paths
from gg.api.events import Event
from gg.api.flights import (
    EstimateAccuracy,
    FactsPage,
    FlightDetail,
    FlightFact,
    FlightPage,
    FlightRow,
)
from gg.api.schemas import FlightOpen, RerunOpen
from gg.control import answers, flights
from gg.domain.events import SEQ_MAX
from gg.domain.flight_spec import FlightSpec
from gg.domain.people import Person
from gg.server import auth, encoded
from gg.server.json_body import JsonRoute
from gg.server.off_loop import encoded_off_loop, off_loop

router = APIRouter(route_class=JsonRoute)
Wait = Annotated[float, Query(ge=0, le=60)]
After = Annotated[int, Query(ge=0, le=SEQ_MAX)]  # a seq: an event's or a fact's
FACTS_PAGE = TypeAdapter(FactsPage)
FACT = TypeAdapter(FlightFact)
EVENT = TypeAdapter(Event)


def opening(body: FlightOpen) -> FlightSpec:
    """The spec the open's body asks for (this route and ``open_call.py``)."""
    return FlightSpec.from_wire(body.model_dump())


@router.get(paths.FLIGHTS, response_model=FlightPage)
async def list_flights(request: Request, person: Person = Depends(auth.person),
                       stage: str | None = None,
                       limit: Annotated[int, Query(ge=1, le=1000)] = 200,
                       cursor: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    # On a thread of its own: a first page plays the queue forward for its estimates (tens to
    # hundreds of milliseconds of CPU), which must not hold up the parked claims' answers.
    rows = await off_loop(flights.list_flights, request.app.state.core, stage=stage,
                          limit=limit, cursor=cursor)
    # The rows are plain JSON values already; FastAPI's response validation of 10,000 of
    # them cost seconds (docs/performance-placement.md), orjson costs milliseconds.
    # The schema still documents them (tests/server/test_wire.py holds them to it).
    return Response(orjson.dumps(rows), media_type="application/json")


@router.get(paths.FLIGHT, response_model=FlightDetail)
async def show_flight(flight_id: str, request: Request,
                      person: Person = Depends(auth.person)) -> dict:
    return await off_loop(flights.show_flight, request.app.state.core, flight_id)


@router.get(paths.FLIGHT_FACTS, response_model=FactsPage)
async def follow_facts(flight_id: str, request: Request, person: Person = Depends(auth.person),
                       after: After = 0, wait: Wait = 0) -> Response:
    """Facts after ``after``; with ``wait`` the request is held until one arrives or the flight ends."""
    watch = request.app.state.watch
    page = await answers.facts_after(request.app.state.core, flight_id, after=after, wait=wait,
                                     wait_for=lambda seconds: watch.flight(flight_id, seconds,
                                                                           request.scope))
    return await off_loop(facts_answer, page)  # a chatty flight's output is long


def facts_answer(page: dict) -> Response:
    """The page as ``FactsPage`` encodes it, its facts one at a time (gg.server.encoded)."""
    return Response(encoded.page(FACTS_PAGE, FACT, page, "facts"),
                    media_type="application/json")


@router.post(paths.FLIGHT_CANCEL, response_model=FlightDetail)
async def cancel(flight_id: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return await answers.cancelled(request.app.state.core, person, flight_id)


@router.post(paths.FLIGHT_RERUN, response_model=FlightRow, status_code=201)
async def rerun(flight_id: str, body: RerunOpen, request: Request,
                person: Person = Depends(auth.person)) -> dict:
    return await answers.rerun(request.app.state.core, person, flight_id, body.model_dump())


@router.get(paths.ESTIMATE_ACCURACY, response_model=EstimateAccuracy)
def estimate_accuracy(request: Request, person: Person = Depends(auth.person),
                            since: Annotated[float | None, Query(ge=0)] = None) -> dict:
    """``since``: seconds back from now (default: every start still kept)."""
    return answers.estimate_accuracy(request.app.state.core, since)


@router.get(paths.EVENTS, response_model=list[Event])
async def events(request: Request, person: Person = Depends(auth.person),
                 after: After = 0, kind: str | None = None,
                 runner: str | None = None, flight: str | None = None,
                 limit: Annotated[int, Query(ge=1, le=10000)] = 1000, wait: Wait = 0) -> Response:
    rows = await answers.events_after(request.app.state.core, after=after, kind=kind,
                                      runner=runner, flight=flight, limit=limit, wait=wait,
                                      wait_for=lambda seconds: request.app.state.watch.events(
                                          seconds, request.scope))
    return await encoded_off_loop(EVENT, rows)  # up to 10,000 of them
