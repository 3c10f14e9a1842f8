"""A console to a machine (SPEC 18, docs/console.md): who may open one, and its life.

A person asks for a console on runner R; the control plane keeps the request (a console
session) and tells R; R dials the session and the two connections meet at the control plane,
which relays the terminal's bytes between them::

    gg console R --open--> waiting --R dials in--> joined --the command ends, or a side goes--> closed
                             |                                                                  ^
                             +-------- R not joined within CONSOLE_JOIN_WAIT, or the person left-+

Who may: the claimed owner of R; an admin for the organisation's machines and open ones.
Anyone else is refused with one sentence before anything reaches the runner (a registered
runner starts as the organisation's: a person who wants a console on their own machine
claims it first). ``--flight F`` joins attended flight F's workspace and sandbox, only while
F flies on R. Pure: ``now`` is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gg.domain.flights import Flight, Stage
from gg.domain.people import Person
from gg.domain.pull import KIND as PULL_KIND
from gg.domain.runners import Runner

# A runner that can serve consoles says so in its inventory's ``features``; an older one (or a
# kind of runner without them) is refused with a sentence instead of leaving a console waiting.
FEATURE = "console"


class ConsoleState(StrEnum):
    WAITING = "waiting"
    JOINED = "joined"
    CLOSED = "closed"


@dataclass(frozen=True)
class ConsoleSession:
    id: str
    runner_id: str
    person_id: str
    person_name: str
    opened_at: float
    command: list[str] = field(default_factory=list)  # empty: the runner's default shell
    flight_id: str | None = None
    term: str = "xterm"
    rows: int = 24
    cols: int = 80
    heard_at: float | None = None  # a check-in answer named it to the runner
    joined_at: float | None = None
    closed_at: float | None = None
    exit_code: int | None = None
    reason: str | None = None

    @property
    def state(self) -> ConsoleState:
        if self.closed_at is not None:
            return ConsoleState.CLOSED
        if self.joined_at is not None:
            return ConsoleState.JOINED
        return ConsoleState.WAITING


def refusal(runner: Runner, person: Person, owner_name: str | None = None) -> str | None:
    """None when ``person`` may open a console on ``runner``; otherwise the one sentence that
    says why not and what would make it possible."""
    name = runner.name
    if runner.retired_at is not None:
        return f"runner {name} is retired: no console reaches it"
    if runner.ownership == "claimed":
        if runner.owner == person.id:
            return None
        return (f"runner {name} is claimed by {owner_name or runner.owner}: only its owner may "
                f"open a console on it")
    if person.is_admin:
        return None
    if runner.ownership == "open":
        return (f"runner {name} is open, not yours: claim it first (gg runner claim {name}) to "
                f"open a console on it")
    return (f"runner {name} belongs to the organisation: only an admin may open a console on "
            f"it")


def flight_refusal(flight: Flight | None, flight_ref: str, runner: Runner) -> str | None:
    """None when a console may join ``flight`` on ``runner``: an attended flight that this
    runner is flying now. Otherwise one sentence."""
    if flight is None:
        return f"no flight {flight_ref}"
    if not flight.attended:
        return (f"flight {flight.id} is not attended: a console joins only an attended flight "
                f"(gg fly --attended --runner {runner.name})")
    if flight.stage != Stage.FLYING or flight.lease_runner != runner.id:
        where = "on another runner" if flight.stage == Stage.FLYING else str(flight.stage)
        return (f"flight {flight.id} is not flying on runner {runner.name} (it is {where}): a "
                f"console joins a flight only while it flies there")
    return None


def offline_refusal(runner: Runner, online: bool) -> str | None:
    if online:
        return None
    return (f"runner {runner.name} is offline: a console reaches a runner only while it checks "
            f"in (start it again, then try again)")


def feature_refusal(runner: Runner) -> str | None:
    if runner.kind == PULL_KIND:  # the relay is dialled by the runner; this one never dials
        return (f"runner {runner.name} is a pull-mode runner: it never dials out, so no "
                "console can reach it; open one on a runner that dials in (gg runners shows "
                "each one's mode)")
    features = (runner.inventory or {}).get("features") or []
    if isinstance(features, list) and FEATURE in features:
        return None
    return (f"runner {runner.name} runs a gg that serves no consoles: upgrade gg on it and "
            f"restart it")


def identity(session: ConsoleSession, runner: Runner) -> str:
    """Whom the console's command runs as, for the record: a console joining a flight takes
    the flight's identity; one to the machine itself runs as the runner's user, which is host
    root when the runner's capability report says it runs as root (docs/isolation.md)."""
    if session.flight_id:
        return "the flight's identity"
    if (runner.capabilities or {}).get("runs_as_root"):
        return "host root"
    return "the runner's user"


def waiting_sentence(runner_name: str, parked: bool, check_in_interval: float) -> str:
    """What the person reads while the console waits for the runner to dial in."""
    if parked:
        return f"waiting: runner {runner_name} was told a console waits; it dials in now"
    return (f"waiting: runner {runner_name} hears of the console at its next check-in (within "
            f"{check_in_interval:g}s)")


def not_joined_sentence(runner_name: str, waited: float) -> str:
    return (f"runner {runner_name} did not join the console within {waited:g}s: it may have "
            f"stopped checking in or cannot reach the control plane (see gg runner show "
            f"{runner_name}); nothing was started on it")


def check_in_interval(base: float, console_interval: float, waiting: bool) -> float:
    """A runner checks in every CONSOLE_CHECK_IN_INTERVAL while a console waits for it
    (until it joins), every CHECK_IN_INTERVAL otherwise."""
    return min(base, console_interval) if waiting else base


def duration(session: ConsoleSession, now: float) -> float:
    """How long the console was open: from the runner joining to its end (0 if it never
    joined)."""
    if session.joined_at is None:
        return 0.0
    end = session.closed_at if session.closed_at is not None else now
    return max(0.0, end - session.joined_at)
