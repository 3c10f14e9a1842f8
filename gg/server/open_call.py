"""``POST /v1/flights``, answered ahead of FastAPI: the open every flight starts with.

Through the framework the open cost several times its use case (route matching over every
route, the dependency tree, the request object, the middlewares, the response model's
validation): in the 16-runner throughput profile it was the largest share of the server's
CPU per flight, larger than the runner's claim and hand-back together (docs/performance.md,
"The open ahead of the framework"). :data:`OPEN` is answered by ``ahead.Ahead`` and
documented by the route ``ahead.document`` makes from it; both run :func:`open_flight`:

- the person's token is checked (``auth.person_of``, on a worker thread), then the body with ``FlightOpen``;
- the use case runs on the store's writer (``answers.opened``, with the spec the body asks for,
  ``routes.flights.opening``), and its row is serialised with ``FlightRow``, answered 201.

A use case's refusal (an environment not charted, a priority not allowed) is answered in the
one error shape.
"""

from __future__ import annotations

from gg.api import paths
from gg.api.flights import FlightRow
from gg.api.schemas import FlightOpen
from gg.control import answers
from gg.domain.people import Person
from gg.server.ahead import Call
from gg.server.auth import person_of
from gg.server.routes.flights import opening


async def open_flight(state, scope, person: Person, body: FlightOpen) -> dict:
    return await answers.opened(state.core, person, opening(body))


OPEN = Call(paths.FLIGHTS, open_flight, FlightOpen, FlightRow, person_of, status=201)
