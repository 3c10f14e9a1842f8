"""Route paths, requests, answers and frames of consoles to a machine (docs/console.md).

A console is opened with one typed request (refused there, with one sentence, when the person
may not), then each side dials its WebSocket: the person's terminal at ``CONSOLE_PERSON``,
the runner at ``CONSOLE_RUNNER``. Binary frames carry the terminal's bytes (keys one way,
output the other); text frames are the small JSON messages below.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from gg.api.schemas import Answer, Arg, Request

CONSOLES = "/v1/consoles"
CONSOLE_PERSON = "/v1/consoles/{console_id}/person"  # WebSocket, a person's token
CONSOLE_RUNNER = "/v1/consoles/{console_id}/runner"  # WebSocket, the runner's credential

Term = Annotated[str, StringConstraints(max_length=64, pattern=r"^[A-Za-z0-9._+-]*$")]

# Text frames (JSON objects), by their one key:
#   person -> runner   {"resize": [rows, cols]}
#   runner -> person   {"exit": status}              the command ended with this status
#   server -> person   {"joined": true}              the runner dialled in: the terminal is live
#                      {"error": sentence}           the console ends without a command status
RESIZE, EXIT, JOINED, ERROR = "resize", "exit", "joined", "error"


class ConsoleOpen(Request):
    runner: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    command: Annotated[list[Arg], Field(max_length=4096)] = []  # empty: the default shell
    flight: Annotated[str, StringConstraints(max_length=200)] | None = None
    term: Term = "xterm"
    rows: Annotated[int, Field(ge=1, le=10_000)] = 24
    cols: Annotated[int, Field(ge=1, le=10_000)] = 80


class ConsoleOpened(Answer):
    id: str
    runner: str  # the runner's id
    runner_name: str
    flight: str | None = None
    state: str
    opened_at: float
    join_wait: float  # the runner must dial in within this many seconds
    waiting: str  # how the runner hears of it, as a waiting sentence (gg.domain.machine_console)


class ConsoleCall(Answer):
    """A console waiting for the runner, as its check-in answer names it: dial it."""
    id: str
    person: str = ""  # who asked (the runner's log names them)
    command: list[str] = []
    flight: str | None = None
    term: str = "xterm"
    rows: int = 24
    cols: int = 80
