"""The pull-mode wire (docs/runner-modes.md): what ``gg runner attach`` asks the control
plane, and what the control plane and a listening runner say to each other.

The control plane calls the runner; the runner never calls out. One poll is two calls:
``poll`` (the runner answers with its check-in, the leases it holds and its outbox of
reports and hand-backs) and ``deliver`` (the control plane answers that: the check-in's
answer, which outbox entries it applied or refused, the leases it renewed, the flights it
granted). Both are signed both ways (gg.domain.pull).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from gg.api.paths import RUNNER_ATTACH  # noqa: F401 - gg runner attach (admin)
from gg.api.runners import CheckedIn, Claimed, LeaseRenewed
from gg.api.schemas import Answer, CheckIn, Fact, HandBack, Request

# http(s)://, a host name or address (IPv6 in brackets), an optional port, a printable path
_URL = (r"^https?://([A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])"
        r"(:[0-9]{1,5})?(/[!-~]*)?$")
Url = Annotated[str, StringConstraints(min_length=8, max_length=500, pattern=_URL)]


class AttachAsk(Request):
    """``gg runner attach URL --name N [--fingerprint FP]``."""
    url: Url
    name: Annotated[str, StringConstraints(min_length=1, max_length=63)]
    fingerprint: Annotated[str | None, StringConstraints(max_length=100)] = None


class RunnerKey(Answer):
    """The runner's public key, signed over the asker's nonce (it holds the private half)."""
    public_key: str
    fingerprint: str
    version: str | None = None


class AttachRunner(Request):
    """The control plane hands the runner its public key to pin."""
    control_key: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    name: Annotated[str, StringConstraints(max_length=63)] = ""


class Pinned(Answer):
    control_key_fingerprint: str


class Held(Request):
    flight: Annotated[str, StringConstraints(max_length=64)]
    epoch: Annotated[int, Field(ge=1)]


class OutboxEntry(Request):
    """A report or a hand-back the runner made, waiting for the control plane to take it."""
    seq: Annotated[int, Field(ge=1)]
    flight: Annotated[str, StringConstraints(max_length=64)]
    epoch: Annotated[int, Field(ge=1)]
    kind: Literal["report", "hand_back"]
    facts: Annotated[list[Fact], Field(max_length=1000)] = []
    hand_back: HandBack | None = None


class PollAsk(Request):
    runner: Annotated[str, StringConstraints(max_length=64)]
    name: Annotated[str, StringConstraints(max_length=63)]


class Polled(Answer):
    """The runner's answer to a poll: its check-in, what it holds, what it has to say."""
    check_in: CheckIn
    held: list[Held] = []
    outbox: list[OutboxEntry] = []
    goodbye: bool = False  # it is stopping and holds nothing: offline now, not after a while
    # This answer's number: the delivery names it back, so the runner counts each renewed
    # lease from when it answered the poll that renewed it (docs/runner-modes.md).
    poll: Annotated[int | None, Field(ge=1)] = None


class Refusal(Answer):
    flight: str
    seq: int | None = None  # the outbox entry refused (None: the lease, at renewal)
    status: int
    code: str
    message: str


class Delivery(Request):
    runner: Annotated[str, StringConstraints(max_length=64)]
    checked_in: dict[str, Any]  # a CheckedIn
    applied: list[int] = []  # outbox entries taken (or refused for good)
    refusals: list[dict[str, Any]] = []  # Refusal
    renewals: list[dict[str, Any]] = []  # LeaseRenewed
    grants: list[dict[str, Any]] = []  # Claimed
    retired: bool = False
    poll: Annotated[int | None, Field(ge=1)] = None  # the poll (Polled.poll) this answers


class Delivered(Answer):
    taken: list[str] = []  # the flights it took from ``grants``
    refused: list[str] = []  # granted, but it could not take them now (handed back next poll)


__all__ = ["AttachAsk", "RunnerKey", "AttachRunner", "Pinned", "Held", "OutboxEntry", "PollAsk",
           "Polled", "Refusal", "Delivery", "Delivered", "CheckedIn", "Claimed", "LeaseRenewed"]
