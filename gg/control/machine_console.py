"""Consoles to a machine (docs/console.md): open, tell the runner, join, close.

The rules are :mod:`gg.domain.machine_console`; these use cases keep the session's row (so
every replica can see what waits for a runner) and record ``info:console:opened`` and
``info:console:closed``. The bytes of the terminal never pass through here: the server's
relay (:mod:`gg.server.relay`) carries them once both sides have dialled in.
"""

from __future__ import annotations

from gg.control.core import Core
from gg.control.runners import resolve
from gg.domain import machine_console as rules
from gg.domain import tokens
from gg.domain.events import EventKind
from gg.domain.machine_console import ConsoleSession
from gg.domain.people import Person
from gg.domain.runners import Instruction, Runner, is_online
from gg.error_codes import ErrorCode
from gg.errors import Conflict, Forbidden, NotFound

RESTARTED = "the control plane restarted"


def open_console(core: Core, person: Person, ref: str, *, command: list[str],
                 flight_ref: str | None, term: str, rows: int, cols: int) -> ConsoleSession:
    """A console session waiting for runner ``ref``, and the runner told at once; refused
    with one sentence (nothing stored, nothing told) when ``person`` may not open it."""
    now = core.now()
    with core.store.atomic():
        runner = resolve(core, ref)
        owner = core.store.person(runner.owner) if runner.owner else None
        why = rules.refusal(runner, person, owner.name if owner else None)
        if why:
            raise Forbidden(why, code=ErrorCode.CONSOLE_REFUSED)
        if flight_ref:
            why = rules.flight_refusal(core.store.flight(flight_ref), flight_ref, runner)
            if why:
                raise Conflict(why, code=ErrorCode.CONSOLE_FLIGHT_NOT_FLYING)
        why = rules.offline_refusal(runner, is_online(runner, now, core.settings.offline_after))
        if why:
            raise Conflict(why, code=ErrorCode.RUNNER_OFFLINE)
        why = rules.feature_refusal(runner)
        if why:
            raise Conflict(why, code=ErrorCode.CONSOLE_UNSUPPORTED)
        session = ConsoleSession(id=tokens.new_id("c_"), runner_id=runner.id,
                                 person_id=person.id, person_name=person.name,
                                 opened_at=now, command=list(command), flight_id=flight_ref,
                                 term=term, rows=rows, cols=cols)
        core.store.add_console(session)
    core.signals.instruct(runner.id, Instruction.CONSOLE)
    return session


def runner_name(core: Core, session: ConsoleSession) -> str:
    runner = core.store.runner(session.runner_id)
    return runner.name if runner else session.runner_id


def for_person(core: Core, person: Person, console_id: str) -> ConsoleSession:
    """The console the person opened; nobody else's (the same answer for unknown ones)."""
    session = core.store.console(console_id)
    if session is None or session.person_id != person.id:
        raise NotFound(f"no console {console_id} of yours")
    return session


def join(core: Core, runner: Runner, console_id: str) -> ConsoleSession:
    """The runner dials in: the console is open (``info:console:opened``). Refused when it
    is not this runner's, or no longer waits; a ``--flight`` console only while the flight
    still flies here."""
    now = core.now()
    with core.store.atomic():
        session = core.store.console(console_id)
        if session is None or session.runner_id != runner.id:
            raise NotFound(f"no console {console_id} waits for this runner")
        if session.flight_id:
            why = rules.flight_refusal(core.store.flight(session.flight_id), session.flight_id,
                                       runner)
            if why:
                _close(core, session, now, exit_code=None, reason=why)
                raise Conflict(why, code=ErrorCode.CONSOLE_FLIGHT_NOT_FLYING)
        if not core.store.join_console(console_id, runner.id, now):
            raise Conflict(f"console {console_id} no longer waits",
                           code=ErrorCode.CONSOLE_NOT_WAITING)
        core.event(EventKind.CONSOLE_OPENED, actor=session.person_name, runner_id=runner.id,
                   flight_id=session.flight_id, at=now, console=session.id,
                   person=session.person_name, runner=runner.name, command=session.command,
                   waited=round(now - session.opened_at, 3),
                   identity=rules.identity(session, runner))
    joined = core.store.console(console_id)
    if joined is None:  # closed and pruned since
        raise NotFound(f"no console {console_id} waits for this runner")
    return joined


def close(core: Core, console_id: str, *, exit_code: int | None, reason: str | None) -> None:
    """The console is over (``info:console:closed``, with how long it was open); a second
    close changes nothing."""
    now = core.now()
    with core.store.atomic():
        session = core.store.console(console_id)
        if session is None:
            return
        _close(core, session, now, exit_code=exit_code, reason=reason)


def _close(core: Core, session: ConsoleSession, now: float, *, exit_code: int | None,
           reason: str | None) -> bool:
    if not core.store.close_console(session.id, now, exit_code=exit_code, reason=reason):
        return False
    runner = core.store.runner(session.runner_id)
    core.event(EventKind.CONSOLE_CLOSED, actor=session.person_name, runner_id=session.runner_id,
               flight_id=session.flight_id, at=now, console=session.id,
               person=session.person_name, runner=runner.name if runner else session.runner_id,
               joined=session.joined_at is not None,
               seconds=round(rules.duration(session, now), 3), exit_code=exit_code,
               reason=reason)
    return True


def close_left_open(core: Core) -> int:
    """At start: a console the last process relayed is gone with it; close each, recorded."""
    now = core.now()
    with core.store.atomic():
        left = core.store.consoles_left_open()
        for session in left:
            _close(core, session, now, exit_code=None, reason=RESTARTED)
    return len(left)


def waiting_sentence(core: Core, session: ConsoleSession, parked: bool) -> str:
    return rules.waiting_sentence(runner_name(core, session), parked,
                                  core.settings.check_in_interval)


def not_joined(core: Core, session: ConsoleSession) -> str:
    """The console waited CONSOLE_JOIN_WAIT in vain: closed, and the sentence for the person."""
    sentence = rules.not_joined_sentence(runner_name(core, session),
                                         core.settings.console_join_wait)
    close(core, session.id, exit_code=None, reason="the runner did not join")
    return sentence

