"""What the routes answered ahead of FastAPI share: the credential, the body, the answer.

A few calls are answered by plain ASGI handlers wrapped around the app's middleware stack
(``claims.py``: the claim, which parks; ``lease_calls.py``: renew, facts, hand-back, the calls
every flight makes; ``open_call.py``: a person's open of a flight). Each does what its FastAPI
route does (which stays registered, so the published schema documents it) with the same
pieces, kept here once:

- :func:`headers` reads the bearer token and says whether the request is one to read at all
  (a JSON body within a declared length the app would accept); anything else is the app's;
- :func:`read_body` reads the whole body within ``GG_MAX_BODY_BYTES`` (None past it, or when
  the connection went), keeping the messages read so that :func:`replay` can hand the request
  to the app unchanged: every refusal before a use case runs (a bad credential, a body that is
  not JSON or that the model refuses) is the app's own answer, byte for byte;
- :func:`failure` answers a use case's refusal (``GGError``) or crash in the one error shape,
  as the app's exception handlers do;
- :func:`answer` serialises a use case's answer with the route's response model, as FastAPI's
  fast path does (pydantic's own JSON writer).
"""

from __future__ import annotations

import time

from pydantic import TypeAdapter
from starlette.responses import Response

from gg.errors import GGError
from gg.server import errors
from gg.server.json_body import loads


def headers(scope, max_bytes: int) -> tuple[str | None, bool]:
    """The bearer token, and whether this request is one to read here: a JSON body within a
    declared length the app would accept (anything else is the app's to refuse). Where a
    header comes twice, the first counts, as for the app."""
    seen: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        seen.setdefault(name, value)
    header = seen.get(b"authorization", b"").decode("latin-1")
    scheme, _, given = header.partition(" ")
    token = given.strip() if scheme.lower() == "bearer" and given.strip() else None
    content_type = seen.get(b"content-type", b"").decode("latin-1")
    length = seen.get(b"content-length")
    read = (content_type.partition(";")[0].strip().lower() == "application/json"
            and (length is None or (length.isdigit() and int(length) <= max_bytes)))
    return token, read


async def read_body(receive, max_bytes: int) -> tuple[bytes | None, list]:
    """The whole body (None past the limit or on a disconnect) and the messages read."""
    received, size = [], 0
    while True:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request":
            return None, received
        size += len(message.get("body", b""))
        if size > max_bytes:
            return None, received
        if not message.get("more_body", False):
            break
    if len(received) == 1:
        return received[0].get("body", b""), received
    return b"".join(m.get("body", b"") for m in received), received


def replay(received: list, receive):
    """A ``receive`` that gives back the messages already read, then reads on."""
    pending = list(received)

    async def replayed():
        return pending.pop(0) if pending else await receive()

    return replayed


def failure(exc: Exception, method: str, path: str) -> Response:
    """A use case's refusal, or a crash, in the one error shape (``errors.install``)."""
    if isinstance(exc, GGError):
        extra = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return errors.error_response(exc.status, exc.code, exc.message, extra)
    return errors.crash_response(exc, method, path)


def answer(adapter: TypeAdapter, value, status: int = 200) -> Response:
    """Serialised as the route's response model serialises it (FastAPI's fast path)."""
    return Response(adapter.dump_json(adapter.validate_python(value), by_alias=True),
                    status_code=status, media_type="application/json")


class Route:
    """ASGI: the ``POST`` requests :meth:`match` picks are answered by :meth:`answer`, ahead
    of the framework, and counted in the request metrics under their route's template;
    everything else goes to ``inner`` (the app's middleware stack, or another Route)."""

    def __init__(self, app, inner):
        self.state = app.state  # core, dispatcher, request metrics
        self.inner = inner
        self.max_bytes = self.state.core.settings.max_body_bytes

    def match(self, path: str) -> tuple[str, tuple] | None:
        """(the route's template, what :meth:`answer` takes after ``send``) for a path
        answered here, else None."""
        raise NotImplementedError

    def accept(self, token: str | None, data, *args):
        """The caller and the body checked (credential, then the route's model), as what
        :meth:`respond` takes; any exception hands the request to the app, so that every
        refusal before the use case is the app's own answer, byte for byte."""
        raise NotImplementedError

    async def respond(self, scope, accepted, *args) -> Response:
        """The use case's answer (a use case's refusal: any GGError)."""
        raise NotImplementedError

    async def answer(self, scope, receive, send, *args) -> int | None:
        """The status answered, or None where the app answered (and counted) it."""
        token, readable = headers(scope, self.max_bytes)
        if not readable:
            return await self.inner(scope, receive, send)
        raw, received = await read_body(receive, self.max_bytes)
        if raw is None:  # too large, or the connection went: the app answers as it would
            return await self.inner(scope, replay(received, receive), send)
        try:
            accepted = self.accept(token, loads(raw) if raw else None, *args)
        except Exception:  # noqa: BLE001 - every refusal (or failure) is the app's own answer
            return await self.inner(scope, replay(received, receive), send)
        del raw, received  # a parked claim keeps only what it was accepted as
        try:
            response = await self.respond(scope, accepted, *args)
        except Exception as exc:  # noqa: BLE001 - the one error shape, as the app's handlers
            response = failure(exc, "POST", scope["path"])
        await response(scope, receive, send)
        return response.status_code

    async def __call__(self, scope, receive, send):
        matched = (self.match(scope["path"])
                   if scope["type"] == "http" and scope["method"] == "POST" else None)
        if matched is None:
            return await self.inner(scope, receive, send)
        template, args = matched
        started = time.perf_counter()
        status = await self.answer(scope, receive, send, *args)
        if status is not None:
            self.state.request_metrics.observe(template, "POST", status,
                                               time.perf_counter() - started)
