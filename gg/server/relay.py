"""The console relay: where a person's terminal and a runner's connection meet.

A console (docs/console.md) is two WebSockets that both dial the control plane: the person's
(``gg console R``) and the runner's (told of the console on its parked claim or at its next
check-in). The relay pairs them by console id and copies frames both ways until one side
ends. It never reads the terminal's bytes; it only watches for the runner's ``{"exit": N}``
so that ``info:console:closed`` can carry the status.

The seam is :class:`Relay`: ``meet`` (the console's meeting place, made by whichever side
dials first: the runner hands its connection over there, the person's side relays from
there) and ``forget``. :class:`LocalRelay` serves one server process, which is enough while
the runner and the person reach the same process (one server, or sticky routing by console
id). A relay across replicas (docs/console.md, "The relay") keeps the same two calls:
``meet`` on replica B finds in the store that the meeting lives on replica A and hands back
a meeting whose runner side forwards frames to A (a replica-to-replica WebSocket, or
LISTEN/NOTIFY for the small frames); nothing in the routes or in control changes.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from gg.api import consoles as wire


@dataclass(eq=False)
class Meeting:
    """One console's two sides on this process; either may come first."""

    console_id: str
    runner: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    person_here: asyncio.Event = field(default_factory=asyncio.Event)
    over: asyncio.Event = field(default_factory=asyncio.Event)


class Relay(Protocol):
    def meet(self, console_id: str) -> Meeting: ...

    def forget(self, console_id: str) -> None: ...


class LocalRelay:
    """Both sides on this server process."""

    def __init__(self) -> None:
        self.meetings: dict[str, Meeting] = {}

    def meet(self, console_id: str) -> Meeting:
        """The console's meeting place, made by whichever side comes first."""
        meeting = self.meetings.get(console_id)
        if meeting is None:
            meeting = self.meetings[console_id] = Meeting(console_id)
        return meeting

    def forget(self, console_id: str) -> None:
        meeting = self.meetings.pop(console_id, None)
        if meeting is not None:
            if not meeting.runner.done():
                meeting.runner.cancel()
            meeting.over.set()

    def close_all(self) -> None:
        for console_id in list(self.meetings):
            self.forget(console_id)


@dataclass
class Ended:
    """How a relayed console ended: the command's status, or why there is none."""

    exit_code: int | None = None
    reason: str | None = None


async def pump(person: WebSocket, runner: WebSocket, first: asyncio.Task | None = None) -> Ended:
    """Copy frames both ways until a side ends; the runner's ``{"exit": N}`` ends it.
    ``first``: a receive from the person already under way (its result is relayed first)."""
    ended = Ended()

    async def keys() -> None:  # person -> runner
        pending = first
        while True:
            if pending is not None:
                message, pending = await pending, None
            else:
                message = await person.receive()
            if message["type"] == "websocket.disconnect":
                ended.reason = ended.reason or "the person left"
                return
            if message.get("bytes") is not None:
                await runner.send_bytes(message["bytes"])
            elif message.get("text") is not None:
                await runner.send_text(message["text"])

    async def screen() -> None:  # runner -> person
        while True:
            message = await runner.receive()
            if message["type"] == "websocket.disconnect":
                ended.reason = ended.reason or "the runner went away"
                return
            if message.get("bytes") is not None:
                await person.send_bytes(message["bytes"])
            elif message.get("text") is not None:
                text = message["text"]
                status = _exit_status(text)
                await person.send_text(text)
                if status is not None:
                    ended.exit_code = status
                    return

    tasks = [asyncio.create_task(keys()), asyncio.create_task(screen())]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task.exception() is not None and not isinstance(
                    task.exception(), (WebSocketDisconnect, RuntimeError, OSError)):
                ended.reason = ended.reason or f"relay error: {type(task.exception()).__name__}"
            elif task.exception() is not None:
                ended.reason = ended.reason or "a connection was lost"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return ended


def _exit_status(text: str) -> int | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get(wire.EXIT), int):
        return value[wire.EXIT]
    return None


async def say(ws: WebSocket, key: str, value: Any) -> None:
    """One small JSON frame to a side still connected (a lost one is not an error here)."""
    if ws.application_state != WebSocketState.CONNECTED:
        return
    try:
        await ws.send_text(json.dumps({key: value}))
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass


async def end(ws: WebSocket, code: int = 1000) -> None:
    if ws.application_state == WebSocketState.CONNECTED:
        try:
            await ws.close(code)
        except (RuntimeError, OSError):
            pass
