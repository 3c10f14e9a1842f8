"""The console relay: where a person's terminal and a runner's connection meet.

A console (docs/console.md) is two WebSockets that both dial the control plane: the person's
(``gg console R``) and the runner's (told of the console on its parked claim or at its next
check-in). The relay pairs them by console id and copies frames both ways until one side
ends. It never reads the terminal's bytes; it only watches for the runner's ``{"exit": N}``
so that ``info:console:closed`` can carry the status.

The seam is :class:`Relay`: ``meet`` (the console's meeting place, made by whichever side
dials first: the runner hands its connection over there with ``runner_came``, the person's
side says ``person_came`` and relays from there) and ``forget``. :class:`LocalRelay` serves
one server process. :class:`SharedRelay` serves replicas sharing a PostgreSQL store, where
the two sides may reach different replicas: each replica says on the wake-up channel which
side it holds, and when the other side is on another replica the frames cross by NOTIFY
(docs/console.md, "The relay"). The routes and control are the same for both.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from gg.api import consoles as wire
from gg.store import wakeups


@dataclass(eq=False)
class Meeting:
    """One console's two sides on this process; either may come first."""

    console_id: str
    runner: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    person_here: asyncio.Event = field(default_factory=asyncio.Event)
    over: asyncio.Event = field(default_factory=asyncio.Event)

    def person_came(self) -> None:
        """The person's terminal is here (its side relays from this meeting)."""
        self.person_here.set()

    def runner_came(self, websocket: WebSocket) -> None:
        """The runner's connection is here: the person's side relays to it."""
        self.runner.set_result(websocket)


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


DISCONNECT = {"type": "websocket.disconnect", "code": 1000}
TO_RUNNER, TO_PERSON = "k", "s"  # keys go to the runner, the screen to the person
FRAME_MAX = wakeups.PAYLOAD_MAX - 1000  # base64 characters per notification; then the header


@dataclass(eq=False)
class SharedMeeting(Meeting):
    """A meeting on one replica of several: which sides are here, and the far side's state."""

    relay: "SharedRelay | None" = None
    person_local: bool = False
    runner_local: WebSocket | None = None
    far: "FarRunner | None" = None  # the person is here, the runner on another replica
    inbox: asyncio.Queue | None = None  # the runner is here, the person on another replica
    answered: bool = False  # this side said again it is here, for a far side that came first
    partial: list[str] = field(default_factory=list)

    def person_came(self) -> None:
        self.person_local = True
        super().person_came()
        assert self.relay is not None, "a shared meeting is made by its relay"
        self.relay.tell(self.console_id, "P")

    def runner_came(self, websocket: WebSocket) -> None:
        self.runner_local = websocket
        super().runner_came(websocket)
        assert self.relay is not None, "a shared meeting is made by its relay"
        self.relay.tell(self.console_id, "R")


class FarRunner:
    """The runner's side as the person's replica sees it when the runner is on another:
    what :func:`pump` needs of a WebSocket, its frames crossing by NOTIFY."""

    def __init__(self, relay: "SharedRelay", console_id: str):
        self.relay = relay
        self.console_id = console_id
        self.application_state = WebSocketState.CONNECTED
        self.frames: asyncio.Queue = asyncio.Queue()

    async def receive(self) -> dict:
        return await self.frames.get()

    async def send_bytes(self, data: bytes) -> None:
        self.relay.frame(self.console_id, TO_RUNNER, "b", data)

    async def send_text(self, text: str) -> None:
        self.relay.frame(self.console_id, TO_RUNNER, "t", text.encode())

    async def close(self, code: int = 1000) -> None:
        if self.application_state == WebSocketState.CONNECTED:
            self.application_state = WebSocketState.DISCONNECTED
            self.relay.tell(self.console_id, "X")


class SharedRelay(LocalRelay):
    """Replicas sharing a PostgreSQL store. Both sides on this replica meet as in
    :class:`LocalRelay`. Otherwise each side's replica says it holds its side (``P``, ``R``)
    on the wake-up channel, and says it again once when it hears the other (which may have
    spoken before this side came); from then on the person's replica pumps against a
    :class:`FarRunner` and the runner's replica bridges the runner's WebSocket: frames
    (base64, cut to fit a notification) and the end (``X``) cross by NOTIFY. ``send`` is one
    connection per replica, so each direction is heard in the order it was sent."""

    def __init__(self, name: str, send):
        super().__init__()
        self.name = name
        self.send = send
        self.bridges: set[asyncio.Task] = set()

    def meet(self, console_id: str) -> Meeting:
        meeting = self.meetings.get(console_id)
        if meeting is None:
            meeting = self.meetings[console_id] = SharedMeeting(console_id, relay=self)
        return meeting

    def tell(self, console_id: str, what: str) -> None:
        self.send(f"{self.name} console {console_id} {what}")

    def frame(self, console_id: str, to: str, kind: str, data: bytes) -> None:
        coded = base64.b64encode(data).decode()
        pieces = [coded[i:i + FRAME_MAX] for i in range(0, len(coded), FRAME_MAX)] or [""]
        for i, piece in enumerate(pieces):
            more = "+" if i < len(pieces) - 1 else "."
            self.tell(console_id, f"{to}{more}{kind}{piece}")

    def forget(self, console_id: str) -> None:
        meeting = self.meetings.get(console_id)
        if isinstance(meeting, SharedMeeting) and meeting.far is not None:
            if meeting.far.application_state == WebSocketState.CONNECTED:
                meeting.far.application_state = WebSocketState.DISCONNECTED
                self.tell(console_id, "X")
        super().forget(console_id)

    def heard(self, line: str) -> None:
        """A line another replica said about a console (on the event loop)."""
        console_id, _, what = line.partition(" ")
        meeting = self.meetings.get(console_id)
        if not isinstance(meeting, SharedMeeting) or not what:
            return
        if what == "R":  # the runner is on another replica
            if meeting.person_local and not meeting.runner.done():
                meeting.far = FarRunner(self, console_id)
                meeting.runner.set_result(meeting.far)
                self._answer(meeting, "P")
        elif what == "P":  # the person is on another replica
            ws = meeting.runner_local
            if ws is not None and not meeting.person_here.is_set():
                meeting.inbox = asyncio.Queue()
                meeting.person_here.set()
                task = asyncio.create_task(self._bridge(meeting, ws))
                self.bridges.add(task)
                task.add_done_callback(self.bridges.discard)
                self._answer(meeting, "R")
        elif what == "X":
            self._end(meeting)
        elif what[0] in (TO_RUNNER, TO_PERSON) and len(what) >= 3:
            to, more, kind, piece = what[0], what[1], what[2], what[3:]
            here = meeting.inbox if to == TO_RUNNER else (meeting.far.frames if meeting.far
                                                          else None)
            if here is None:
                return
            meeting.partial.append(piece)
            if more == "+":
                return
            data = base64.b64decode("".join(meeting.partial))
            meeting.partial.clear()
            here.put_nowait({"type": "websocket.receive", "bytes": data} if kind == "b"
                            else {"type": "websocket.receive", "text": data.decode()})

    def missed(self) -> None:
        """The listening connection was made again: frames may have been lost meanwhile, so
        every console relayed across replicas ends here (its far side hears ``X``)."""
        for console_id, meeting in list(self.meetings.items()):
            if isinstance(meeting, SharedMeeting) and (meeting.far or meeting.inbox):
                self.tell(console_id, "X")
                self._end(meeting)

    def _answer(self, meeting: SharedMeeting, what: str) -> None:
        if not meeting.answered:
            meeting.answered = True
            self.tell(meeting.console_id, what)

    def _end(self, meeting: SharedMeeting) -> None:
        if meeting.far is not None:
            meeting.far.application_state = WebSocketState.DISCONNECTED
            meeting.far.frames.put_nowait(DISCONNECT)
        if meeting.inbox is not None:
            meeting.inbox.put_nowait(None)

    async def _bridge(self, meeting: SharedMeeting, ws: WebSocket) -> None:
        """The runner is here, the person on another replica: copy both ways until either
        ends; the runner's route closes its WebSocket once ``over`` is set."""
        console_id = meeting.console_id
        inbox = meeting.inbox
        assert inbox is not None, "made before the bridge starts"

        async def keys() -> None:
            while (message := await inbox.get()) is not None:
                if message.get("bytes") is not None:
                    await ws.send_bytes(message["bytes"])
                else:
                    await ws.send_text(message["text"])

        async def screen() -> None:
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("bytes") is not None:
                    self.frame(console_id, TO_PERSON, "b", message["bytes"])
                elif message.get("text") is not None:
                    self.frame(console_id, TO_PERSON, "t", message["text"].encode())

        tasks = [asyncio.create_task(keys()), asyncio.create_task(screen())]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if tasks[1] in done:  # the runner went away (or its connection broke)
                self.tell(console_id, "X")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.meetings.get(console_id) is meeting:
                del self.meetings[console_id]
            meeting.over.set()


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
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass  # the other end is gone already: nothing left to close
