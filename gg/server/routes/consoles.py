"""Console endpoints (docs/console.md): open one, then the person's and the runner's WebSockets.

Opening is an ordinary typed request, refused with one sentence before anything reaches the
runner. Each WebSocket is accepted, then its caller checked (the same tokens as every other
request, in the ``Authorization`` header); a refusal is one ``{"error": sentence}`` frame and
a close, so the person reads a sentence, never a bare status.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request, WebSocket

from gg.api import consoles as wire
from gg.control import answers, people, runners
from gg.control import machine_console as console_ops
from gg.domain.machine_console import ConsoleState
from gg.domain.people import Person
from gg.errors import GGError, Unauthorized
from gg.server import auth, relay
from gg.server.json_body import JsonRoute
from gg.server.off_loop import off_loop

router = APIRouter(route_class=JsonRoute)

REFUSED = 4403  # a WebSocket close code of our own: the console was refused or is over


@router.post(wire.CONSOLES, status_code=201, response_model=wire.ConsoleOpened)
def open_console(body: wire.ConsoleOpen, request: Request,
                       person: Person = Depends(auth.person)) -> dict:
    return answers.console_opened(request.app.state.core, person, ref=body.runner,
                                  command=body.command, flight=body.flight, term=body.term,
                                  rows=body.rows, cols=body.cols,
                                  parked=request.app.state.dispatcher.is_parked)


@router.websocket(wire.CONSOLE_PERSON)
async def person_side(websocket: WebSocket, console_id: str) -> None:
    app = websocket.app
    core, meetings = app.state.core, app.state.relay
    await websocket.accept()
    try:
        token = auth.bearer(websocket)
        if token is None:
            raise Unauthorized("sign in first: gg login --server URL --token-file FILE")
        session = await off_loop(_session_for, core, token, console_id)
    except GGError as exc:
        return await _refuse(websocket, exc.message)
    meeting = meetings.meet(console_id)
    if session.state == ConsoleState.CLOSED or meeting.person_here.is_set():
        why = "closed" if session.state == ConsoleState.CLOSED else "in use by another terminal"
        return await _refuse(websocket, f"console {console_id} is {why}")
    meeting.person_came()
    listen = asyncio.create_task(websocket.receive())
    try:
        left = session.opened_at + core.settings.console_join_wait - core.now()
        await asyncio.wait({meeting.runner, listen}, timeout=max(0.0, left),
                           return_when=asyncio.FIRST_COMPLETED)
        if not meeting.runner.done():
            if listen.done():  # the person left (or spoke out of turn) before the runner came
                await off_loop(console_ops.close, core, console_id, exit_code=None,
                               reason="the person left before the runner joined")
                return
            await relay.say(websocket, wire.ERROR,
                            await off_loop(console_ops.not_joined, core, session))
            return
        runner_ws = meeting.runner.result()
        await relay.say(websocket, wire.JOINED, True)
        ended = await relay.pump(websocket, runner_ws, first=listen)
        await off_loop(console_ops.close, core, console_id, exit_code=ended.exit_code,
                       reason=ended.reason)
        if ended.exit_code is None:  # no status to exit with: say why (a no-op if they left)
            await relay.say(websocket, wire.ERROR,
                            f"the console ended without the command's status: {ended.reason}")
        await relay.end(runner_ws)
    finally:
        if not listen.done():
            listen.cancel()
        meetings.forget(console_id)
        await relay.end(websocket)


@router.websocket(wire.CONSOLE_RUNNER)
async def runner_side(websocket: WebSocket, console_id: str) -> None:
    app = websocket.app
    core, meetings = app.state.core, app.state.relay
    await websocket.accept()
    try:
        runner = await off_loop(runners.authenticate_row, core, auth.bearer(websocket))
        await off_loop(console_ops.join, core, runner, console_id)
    except GGError as exc:
        return await _refuse(websocket, exc.message)
    meeting = meetings.meet(console_id)
    if meeting.runner.done():
        return await _refuse(websocket, f"console {console_id} has its runner already")
    meeting.runner_came(websocket)
    try:  # the person dials right after opening it; the runner may be quicker
        await asyncio.wait_for(meeting.person_here.wait(), core.settings.console_join_wait)
    except asyncio.TimeoutError:
        await off_loop(console_ops.close, core, console_id, exit_code=None,
                       reason="the person never came")
        meetings.forget(console_id)
        return await _refuse(websocket, f"nobody came to console {console_id}")
    await meeting.over.wait()  # the person's side relays, and closes this one when it ends
    await relay.end(websocket)


def _session_for(core, token: str, console_id: str):
    return console_ops.for_person(core, people.authenticate_person(core, token), console_id)


async def _refuse(websocket: WebSocket, sentence: str) -> None:
    await relay.say(websocket, wire.ERROR, sentence)
    await relay.end(websocket, REFUSED)
