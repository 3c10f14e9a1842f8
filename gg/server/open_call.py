"""``POST /v1/flights`` answered ahead of FastAPI: the open every flight starts with.

Through the framework the open cost several times its use case (route matching over every
route, the dependency tree, the request object, the middlewares, the response model's
validation): in the 16-runner throughput profile it was the largest share of the server's
CPU per flight, larger than the runner's claim and hand-back together (docs/performance.md,
"The open ahead of the framework"). :class:`OpenRoute` wraps the app's middleware stack, as
``lease_calls.py`` does for the runner's calls, and answers exactly that method and path,
passing everything else on. It does what the route in ``routes/flights.py`` does (which stays
registered, so the published schema documents it), in the same order and with the same pieces
(``ahead.py``):

- the body is read within ``GG_MAX_BODY_BYTES`` as strict JSON (``json_body.loads``);
- the person's token is checked (``people.authenticate_person``, as ``auth.person``);
- the body is validated with the route's model, ``FlightOpen``;
- the use case runs on the store's writer (``answers.opened``, with the route's own mapping
  of the body, ``routes.flights.opening``), and its row is serialised with the route's
  response model, ``FlightRow``, answered 201.

Anything refused before the use case runs (an unusual content type, a body too large or not
JSON, a missing or bad token, a runner's credential, a body the model refuses) is handed to
the app with the body replayed, so every such refusal is the app's own answer, byte for byte;
a use case's refusal (an environment not charted, a priority not allowed) is answered in the
one error shape here. The request is counted in the request metrics under the route's path.
"""

from __future__ import annotations


from pydantic import TypeAdapter

from gg.api import paths
from gg.api.flights import FlightRow
from gg.api.schemas import FlightOpen
from gg.control import answers, people
from gg.server import ahead
from starlette.responses import Response
from gg.server.routes.flights import opening

_ROW = TypeAdapter(FlightRow)


class OpenRoute(ahead.Route):
    """ASGI: ``POST`` on :data:`paths.FLIGHTS` answered here, the rest by ``inner``."""

    def match(self, path: str) -> tuple[str, tuple] | None:
        return (paths.FLIGHTS, ()) if path == paths.FLIGHTS else None

    def accept(self, token, data):
        return (people.authenticate_person(self.state.core, token),
                FlightOpen.model_validate(data))

    async def respond(self, scope, accepted) -> Response:
        person, body = accepted
        return ahead.answer(_ROW, await answers.opened(self.state.core, person, opening(body)),
                            status=201)
