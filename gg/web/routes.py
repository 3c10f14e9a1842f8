"""The console's routes. Pages: ``GET /ui/<page>`` (``?part=1``: only the live part);
their long poll: ``GET /ui/wait``; actions: ``POST`` forms that answer with a redirect to
the page they came from, or with a plain error page saying why not."""

from __future__ import annotations

import asyncio
from typing import Annotated, Awaitable, Callable

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from gg.control import answers, artifacts, console, flights, gates, graphs, pools
from gg.domain import console as rules
from gg.domain.events import SEQ_MAX
from gg.domain.flight_spec import FlightSpec
from gg.domain.people import Person
from gg.errors import BadRequest, GGError, NotFound, Unauthorized
from gg.web import guard, render

router = APIRouter(include_in_schema=False)  # pages, not the API: not in openapi.json
ACTIONS = ("cordon", "drain", "resume")
_STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def install(app: FastAPI) -> None:
    app.include_router(router, include_in_schema=False)


async def _answer(request: Request, make: Callable[[], Awaitable[Response]]) -> Response:
    """Run one console request; a refusal becomes a plain page (signed out: the sign-in)."""
    try:
        return await make()
    except Unauthorized as exc:
        if request.method == "GET" and request.query_params.get("part") is None:
            return _to(request, "/ui/login")
        return render.page("error.html", {"title": "signed out", "message": exc.message},
                           code=401)
    except GGError as exc:
        return render.page("error.html", {"title": "not done", "message": exc.message},
                           code=exc.status)


def _to(request: Request, path: str) -> Response:
    return guard.secured(RedirectResponse(path, status_code=303))


def _back(fields: dict[str, str], fallback: str) -> str:
    """Where a form returns to: a console page, never another site."""
    back = fields.get("back", "")
    return back if back.startswith("/ui/") and not back.startswith("/ui//") else fallback


# -- signing in and out ------------------------------------------------------------------------


@router.get("/")
async def root(request: Request) -> Response:
    return _to(request, "/ui/flights")


@router.get("/ui")
@router.get("/ui/")
async def ui(request: Request) -> Response:
    return _to(request, "/ui/flights")


@router.get("/ui/login")
async def login_page(request: Request) -> Response:
    value = guard.new_login_token()
    response = render.page("login.html", {"title": "sign in", "form_token": value})
    guard.set_login_token(response, request, value)
    return response


@router.post("/ui/login")
async def login(request: Request) -> Response:
    async def make():
        fields = await guard.form(request)
        guard.check_login_form(request, fields)
        try:
            person, secret, expires_at = await asyncio.to_thread(
                console.sign_in, request.app.state.core, fields.get("token", ""),
                replacing=guard.session_secret(request))
        except Unauthorized:
            raise Unauthorized("that token was not accepted: paste the person token that gg "
                               "login uses (it starts with ggp_), or ask an admin for a new one") from None
        response = _to(request, "/ui/flights")
        guard.set_session(response, request, secret,
                          request.app.state.core.settings.console_session_ttl)
        response.delete_cookie(guard.LOGIN_COOKIE, path="/ui/login")
        return response
    return await _answer(request, make)


@router.post("/ui/logout")
async def logout(request: Request) -> Response:
    async def make():
        fields = await guard.form(request)
        person = await asyncio.to_thread(guard.person, request)
        guard.check_form(request, fields)
        await asyncio.to_thread(console.sign_out, request.app.state.core, person,
                                guard.session_secret(request))
        response = _to(request, "/ui/login")
        guard.end_session(response, request)
        return response
    return await _answer(request, make)


# -- pages ---------------------------------------------------------------------------------------


def _pages(request: Request, name: str, title: str, load: Callable[[Person], dict], *,
           flight: str | None = None, facts_seen: int = 0) -> Response:
    person = guard.person(request)
    core = request.app.state.core
    secret = guard.session_secret(request)
    assert secret is not None, "guard.person signed its session in just above"
    context = dict(load(person), person=person, is_admin=person.is_admin,
                   form_token=rules.form_token(secret),
                   may_cancel=lambda f: rules.may_cancel(person, f["opened_by"]),
                   here=request.url.path, now=core.now())
    if request.query_params.get("part") is not None:
        return render.part(f"{name}.html", context)
    query = request.url.query
    return render.page("page.html", dict(
        context, title=title, part=f"parts/{name}.html",
        part_url=f"{request.url.path}?{query + '&' if query else ''}part=1",
        after=console.newest_event(core), flight_id=flight, facts_seen=facts_seen))


@router.get("/ui/flights")
async def flights_page(request: Request, stage: str | None = None) -> Response:
    async def make():
        core = request.app.state.core
        return await asyncio.to_thread(_pages, request, "flights", "flights", lambda p: {
            "flights": flights.list_flights(core, stage=stage or None, limit=200)["items"],
            "stage": stage})
    return await _answer(request, make)


@router.get("/ui/flights/{flight_id}")
async def flight_page(flight_id: str, request: Request) -> Response:
    async def make():
        return await asyncio.to_thread(page)

    def page() -> Response:
        core = request.app.state.core
        flight = flights.show_flight(core, flight_id)
        facts = flight["facts"]
        output = "".join(f["body"].get("text", "") for f in facts if f["kind"] == "output")
        others = [f for f in facts if f["kind"] != "output"]
        graph = (graphs.graph_of(core, flight_id)  # docs/work-graphs.md
                 if flight["after"] or flight["dependents"] else None)
        return _pages(request, "flight", f"flight {flight_id}",
                      lambda p: {"flight": flight, "output": output, "facts": others,
                                 "graph": graph},
                      flight=flight_id, facts_seen=facts[-1]["seq"] if facts else 0)
    return await _answer(request, make)


@router.get("/ui/flights/{flight_id}/artifacts/{name:path}")
async def artifact_download(flight_id: str, name: str, request: Request) -> Response:
    """An artifact's download link on a flight's page (docs/work-graphs.md), for whoever is
    signed in, sent a chunk at a time."""
    def opened():
        guard.person(request)
        return artifacts.opened(request.app.state.core, flight_id, name)

    async def make():
        row, chunks = await asyncio.to_thread(opened)
        base = name.rsplit("/", 1)[-1].replace('"', "")
        return StreamingResponse(chunks, media_type="application/octet-stream", headers={
            "content-length": str(row["size"]), "x-gg-sha256": row["sha256"],
            "content-disposition": f'attachment; filename="{base}"'})
    return await _answer(request, make)


@router.get("/ui/runners")
async def runners_page(request: Request) -> Response:
    async def make():
        core = request.app.state.core
        return await asyncio.to_thread(_pages, request, "runners", "runners",
                      lambda p: {"runners": answers.runners_listed(core)})
    return await _answer(request, make)


@router.get("/ui/pools")
async def pools_page(request: Request) -> Response:
    async def make():
        core = request.app.state.core
        return await asyncio.to_thread(_pages, request, "pools", "pools",
                                       lambda p: {"pools": pools.list_pools(core)})
    return await _answer(request, make)


@router.get("/ui/gates")
async def gates_page(request: Request, status: str = "open") -> Response:
    async def make():
        core = request.app.state.core
        chosen = None if status == "all" else status
        return await asyncio.to_thread(_pages, request, "gates", "gates",
                      lambda p: {"gates": gates.list_gates(core, chosen), "status": status})
    return await _answer(request, make)


@router.get("/ui/pending")
async def pending_page(request: Request) -> Response:
    async def make():
        core = request.app.state.core
        return await asyncio.to_thread(_pages, request, "pending", "pending",
                                       lambda p: {"pending": console.pending(core)})
    return await _answer(request, make)


@router.get("/ui/events")
async def events_page(request: Request) -> Response:
    async def make():
        core = request.app.state.core

        async def nothing(_seconds: float) -> None:
            return None

        rows = await answers.events_after(core, after=0, kind=None, runner=None, flight=None,
                                          limit=200, wait=0, wait_for=nothing)
        return await asyncio.to_thread(_pages, request, "events", "events",
                                       lambda p: {"events": list(reversed(rows))})
    return await _answer(request, make)


# -- the long poll every page follows ------------------------------------------------------------


@router.get("/ui/wait")
async def wait(request: Request, after: Annotated[int, Query(ge=0, le=SEQ_MAX)] = 0,
               flight: str | None = None,
               facts: Annotated[int, Query(ge=0, le=SEQ_MAX)] = 0) -> Response:
    """Held until something a page shows may have changed (a new event; for a flight's page,
    new output or a new stage), or CONSOLE_WAIT passed: then the page looks again."""
    core = request.app.state.core
    watch = request.app.state.watch
    try:
        await asyncio.to_thread(guard.person, request)
        seconds = core.settings.console_wait
        if flight is not None:
            got = await answers.facts_after(core, flight, after=facts, wait=seconds,
                                            wait_for=lambda s: watch.flight(flight, s))
            if got["facts"] or got["stage"] is None or not render.is_final(got["stage"]):
                facts = got["facts"][-1]["seq"] if got["facts"] else facts
                return guard.secured(JSONResponse({"after": after, "facts": facts}))
        rows = await answers.events_after(core, after=after, kind=None, runner=None,
                                          flight=None, limit=1000, wait=seconds,
                                          wait_for=watch.events)
        newest = rows[-1]["seq"] if rows else after
        return guard.secured(JSONResponse({"after": newest, "facts": facts}))
    except GGError as exc:
        return guard.secured(JSONResponse({"error": {"code": exc.code, "message": exc.message}},
                                          status_code=exc.status))


# -- actions -------------------------------------------------------------------------------------


async def _act(request: Request, fallback: str,
               do: Callable[[Person, dict], Awaitable[object]]) -> Response:
    async def make():
        fields = await guard.form(request)
        person = await asyncio.to_thread(guard.person, request)
        guard.check_form(request, fields)
        await do(person, fields)
        return _to(request, _back(fields, fallback))
    return await _answer(request, make)


@router.post("/ui/flights")
async def open_flight(request: Request) -> Response:
    """``gg fly -- CMD`` from the page: the command (run by the shell) and an environment,
    opened by the same use case as the API's open (which refuses what it refuses), then the
    flight's own page."""
    async def make():
        fields = await guard.form(request)
        person = await asyncio.to_thread(guard.person, request)
        guard.check_form(request, fields)
        command = fields.get("command", "").strip()
        environment = fields.get("environment", "").strip() or None
        if not command:
            raise BadRequest("say what to run: the command is empty")
        if len(command) > 4096 or (environment is not None and len(environment) > 64):
            raise BadRequest("the command takes at most 4096 characters, the environment 64")
        row = await answers.opened(request.app.state.core, person,
                                   FlightSpec(command=(command,), environment=environment))
        return _to(request, f"/ui/flights/{row['id']}")
    return await _answer(request, make)


@router.post("/ui/flights/{flight_id}/force")
async def force(flight_id: str, request: Request) -> Response:
    async def do(person: Person, fields: dict) -> object:
        return await asyncio.to_thread(answers.forced, request.app.state.core, person, flight_id)
    return await _act(request, f"/ui/flights/{flight_id}", do)


@router.post("/ui/flights/{flight_id}/cancel")
async def cancel(flight_id: str, request: Request) -> Response:
    async def do(person: Person, fields: dict) -> object:
        return await answers.cancelled(request.app.state.core, person, flight_id)
    return await _act(request, f"/ui/flights/{flight_id}", do)


@router.post("/ui/gates/{gate_id}/clear")
async def clear_gate(gate_id: str, request: Request) -> Response:
    async def do(person: Person, fields: dict) -> object:
        return await answers.gate_cleared(request.app.state.core, person, gate_id)
    return await _act(request, "/ui/gates", do)


@router.post("/ui/flights/{flight_id}/approve")
async def approve(flight_id: str, request: Request) -> Response:
    # the digest the page showed: a spec changed since is refused
    async def do(person: Person, fields: dict) -> object:
        return await asyncio.to_thread(answers.approved, request.app.state.core, person,
                                       flight_id, fields.get("digest") or None)
    return await _act(request, "/ui/pending", do)


@router.post("/ui/flights/{flight_id}/reject")
async def reject(flight_id: str, request: Request) -> Response:
    async def do(person: Person, fields: dict) -> object:
        reason = fields.get("reason", "").strip()[:500]
        return await asyncio.to_thread(answers.rejected, request.app.state.core, person,
                                       flight_id, reason or None)
    return await _act(request, "/ui/pending", do)


@router.post("/ui/runners/{ref}/{action}")
async def runner_action(ref: str, action: str, request: Request) -> Response:
    async def do(person: Person, fields: dict) -> object:
        if action not in ACTIONS:
            raise NotFound(f"no action {action}: cordon, drain or resume")
        return await asyncio.to_thread(answers.state_changed, request.app.state.core, person,
                                       ref, action)
    return await _act(request, "/ui/runners", do)


# -- gg's own script and style -----------------------------------------------------------------


@router.get("/ui/static/{name}")
async def static(name: str) -> Response:
    path = render.STATIC / name
    kind = _STATIC_TYPES.get(path.suffix)
    if kind is None or "/" in name or name.startswith(".") or not path.is_file():
        return guard.secured(Response("no such file", status_code=404, media_type="text/plain"))
    response = Response(path.read_bytes(), media_type=kind)
    response.headers["Cache-Control"] = "no-cache"
    return guard.secured(response, cache=True)
