"""The calls answered ahead of FastAPI, and the one body each runs whichever way it came in.

A few calls are answered by a plain ASGI handler, :class:`Ahead`, in front of the whole app
where ``gg server`` serves it (:func:`front`) and around the app's middleware stack inside
it (an in-process client's way in): the claim, which parks (``claims.py``); renew, facts
and hand-back, the calls every flight makes (``lease_calls.py``); a person's open of a
flight (``open_call.py``).
Through the framework each cost more than its use case (docs/performance.md). Each is one
:class:`Call` (its template, who may make it, its body and answer models, and its **body**,
the one function that answers it); the app builds both ways in from the same list:

- :class:`Ahead` answers the call itself, ahead of the framework;
- :func:`document` registers the call's FastAPI route, whose endpoint is made here and runs
  the same body: the published schema documents the call, and a request the app answers (a
  refusal handed back, below) meets the very same code. Nothing can drift between the two.

What :class:`Ahead` shares between the calls:

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

import inspect
import re
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from fastapi import APIRouter, Depends
from pydantic import BaseModel, TypeAdapter
from starlette.requests import Request
from starlette.responses import Response

from gg.errors import GGError
from gg.server import errors
from gg.server.auth import bearer
from gg.server.encoded import answer
from gg.server.json_body import loads

# body(app state, ASGI scope, caller, request body, **path values) -> the answer (None: 204)
Body = Callable[..., Awaitable[Any]]


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


@dataclass(frozen=True)
class Call:
    """One ``POST`` answered ahead of the framework, and documented by its route."""

    template: str  # the route's path, as ``paths`` names it
    body: Body  # the one function that answers it, both ways in
    model: type[BaseModel]  # the request body
    response_model: Any
    # (core, bearer token) -> who calls, or raises; awaited (a store read is off the loop)
    caller: Callable[[Any, str | None], Awaitable[Any]]
    status: int = 200
    responses: dict | None = None  # what the schema says besides ``status`` (a 204)
    names: tuple[str, ...] = field(init=False)  # the path's parameters, in order
    pattern: re.Pattern = field(init=False)
    adapter: TypeAdapter = field(init=False)

    def __post_init__(self):
        parts = re.split(r"\{(\w+)\}", self.template)
        names = tuple(parts[1::2])
        pattern = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)"
                          for i, part in enumerate(parts))
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "pattern", re.compile(pattern + r"\Z"))
        object.__setattr__(self, "adapter", TypeAdapter(self.response_model))


def document(router: APIRouter, calls, responses: dict | None = None) -> None:
    """Registers each call's route on ``router`` (``responses``: what every route of the app
    documents besides its own). Its endpoint is made here, so it can only run the call's body:
    FastAPI reads the schema from the signature it is given (the path's parameters, the body's
    model, the request, and the caller through ``Depends``)."""
    for call in calls:
        router.add_api_route(call.template, endpoint(call), methods=["POST"],
                             response_model=call.response_model, status_code=call.status,
                             responses={**(responses or {}), **(call.responses or {})})


def endpoint(call: Call):
    """The FastAPI endpoint of ``call``: the route's parsing, then ``call.body``."""

    async def who_calls(request: Request):
        return await call.caller(request.app.state.core, bearer(request))

    async def answered(request: Request, body, caller, **path):
        value = await call.body(request.app.state, request.scope, caller, body, **path)
        return Response(status_code=204) if value is None else value

    keyword = inspect.Parameter.KEYWORD_ONLY
    answered.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
        *(inspect.Parameter(name, keyword, annotation=str) for name in call.names),
        inspect.Parameter("body", keyword, annotation=call.model),
        inspect.Parameter("request", keyword, annotation=Request),
        inspect.Parameter("caller", keyword, default=Depends(who_calls)),
    ])
    answered.__name__ = answered.__qualname__ = call.body.__name__  # the operation's name
    answered.call = call  # type: ignore[attr-defined]  # tests/server/test_ahead.py reads it
    return answered


class Ahead:
    """ASGI: the ``POST`` requests of :attr:`calls` are answered here, ahead of the framework,
    and counted in the request metrics under their route's template; everything else goes to
    ``passed``: the app's middleware stack (``inner``) where this sits in the app, or the
    whole app for :func:`front`, the one uvicorn serves."""

    def __init__(self, app, inner, calls, passed=None):
        self.app = app
        self.state = app.state  # core, dispatcher, request metrics
        self.inner = inner  # where a request the app must answer itself goes (replay)
        self.passed = inner if passed is None else passed
        self.max_bytes = self.state.core.settings.max_body_bytes
        self.calls = tuple(calls)
        self._exact = {c.template: c for c in self.calls if not c.names}
        self._patterned = [c for c in self.calls if c.names]

    def match(self, path: str) -> tuple[Call, dict] | None:
        """The call a path is, with its path's values, or None."""
        call = self._exact.get(path)
        if call is not None:
            return call, {}
        for call in self._patterned:
            found = call.pattern.match(path)
            if found is not None:
                return call, found.groupdict()
        return None

    def __call__(self, scope, receive, send):
        """ASGI, as a plain function that hands back what answers the request: no frame of
        its own is held while a parked claim waits (each is an object the collector walks)."""
        matched = (self.match(scope["path"])
                   if scope["type"] == "http" and scope["method"] == "POST" else None)
        if matched is None:
            return self.passed(scope, receive, send)
        return self.answer(scope, receive, send, *matched)

    async def answer(self, scope, receive, send, call: Call, path: dict) -> None:
        """Answer ``call`` and count it; where the app answers it instead, the app counts it."""
        started = time.perf_counter()
        scope["app"] = self.app  # as the framework sets it: the app's own answer reads it
        token, readable = headers(scope, self.max_bytes)
        if not readable:
            return await self.inner(scope, receive, send)
        raw, received = await read_body(receive, self.max_bytes)
        if raw is None:  # too large, or the connection went: the app answers as it would
            return await self.inner(scope, replay(received, receive), send)
        try:  # the caller, then the body's model: as the route checks them
            caller = await call.caller(self.state.core, token)
            body = call.model.model_validate(loads(raw) if raw else None)
        except Exception:  # noqa: BLE001 - every refusal (or failure) is the app's own answer
            return await self.inner(scope, replay(received, receive), send)
        del raw, received  # a parked claim keeps only what it was accepted as
        try:
            answering = call.body(self.state, scope, caller, body, **path)
            del caller, body  # the body's coroutine holds what it still needs (a parked claim
            value = await answering  # drops its request body before it parks)
            response = (Response(status_code=204) if value is None
                        else answer(call.adapter, value, call.status))
        except Exception as exc:  # noqa: BLE001 - the one error shape, as the app's handlers
            response = failure(exc, "POST", scope["path"])
        await response(scope, receive, send)
        self.state.request_metrics.observe(call.template, "POST", response.status_code,
                                           time.perf_counter() - started)


def front(app) -> Ahead:
    """What uvicorn serves: the calls answered ahead of the whole app, FastAPI's and
    Starlette's own entry included, whose frames a parked claim would hold (and FastAPI's
    looks up its telemetry settings on every request); every other request (and the
    lifespan) goes to ``app``. The app itself keeps its own :class:`Ahead` (an in-process
    client reaches the calls the same way)."""
    within = app.middleware_stack
    return Ahead(app, within.inner, within.calls, passed=app)
