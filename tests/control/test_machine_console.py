"""Consoles to a machine through the use cases: what waits for a runner, how it hears, the
events, and a restart (a real store, a hand-moved clock)."""

from __future__ import annotations

import pytest

from gg.control import machine_console as consoles
from gg.control import runners
from gg.domain.runners import Instruction
from gg.errors import Conflict, Forbidden

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")  # console rows: storage semantics


def _open(core, person, ref="r1", **kw):
    args = dict(command=["sh"], flight_ref=None, term="xterm", rows=24, cols=80)
    return consoles.open_console(core, person, ref, **{**args, **kw})


def _runner(core, person, name="r1"):
    """A runner with a capability report on file (else its claims hear check_in first)."""
    runner = make_runner(core, person, name=name)
    check_in(core, runner, capabilities={"isolation_levels": ["none"]},
             inventory={"features": ["console"]})
    return core.store.runner(runner.id)


def _heartbeat(core, runner):
    return runners.heartbeat(core, core.store.runner(runner.id), readings={}, free_slots=1,
                             peer_address=None, stated_policy=None)


def test_a_waiting_console_is_told_on_the_claim_then_named_by_every_check_in_until_joined(
        core, owner):
    runner = _runner(core, owner)
    told = []
    core.signals.on_instruction.append(lambda runner_id, kind: told.append((runner_id, kind)))
    session = _open(core, owner)
    assert told == [(runner.id, Instruction.CONSOLE)]  # pushed to its parked claim
    assert _heartbeat(core, runner) is Instruction.CONSOLE  # and derived at a claim
    answer = check_in(core, runner)
    assert [c["id"] for c in answer["consoles"]] == [session.id]
    assert answer["consoles"][0]["person"] == "owner"
    assert answer["check_in_interval"] == core.settings.console_check_in_interval
    assert _heartbeat(core, runner) is None  # heard: its check-ins name it from now on
    assert check_in(core, runner)["consoles"] != []  # until it joins
    consoles.join(core, core.store.runner(runner.id), session.id)
    answer = check_in(core, runner)
    assert answer["consoles"] == []
    assert answer["check_in_interval"] == core.settings.check_in_interval


def test_a_refused_console_is_stored_nowhere_and_told_to_nobody(core, owner, ada):
    runner = _runner(core, owner)
    told = []
    core.signals.on_instruction.append(lambda *args: told.append(args))
    with pytest.raises(Forbidden, match="belongs to the organisation"):
        _open(core, ada)
    assert told == [] and core.store.consoles_waiting(runner.id) == []
    assert _heartbeat(core, runner) is None


def test_opened_and_closed_events_say_who_which_runner_and_how_long(core, owner, clock):
    runner = _runner(core, owner)
    session = _open(core, owner)
    clock.advance(2)
    consoles.join(core, core.store.runner(runner.id), session.id)
    clock.advance(30)
    consoles.close(core, session.id, exit_code=0, reason=None)
    consoles.close(core, session.id, exit_code=0, reason=None)  # once only
    events = [e for e in core.store.events() if e["kind"].startswith("info:console:")]
    kinds = sorted(e["kind"] for e in events)
    assert kinds == ["info:console:closed", "info:console:opened"]
    closed = next(e for e in events if e["kind"] == "info:console:closed")
    assert closed["actor"] == "owner" and closed["body"]["runner"] == "r1"
    assert closed["body"]["seconds"] == 30 and closed["body"]["exit_code"] == 0


def test_a_console_cannot_be_joined_twice_nor_by_another_runner(core, owner):
    runner = _runner(core, owner)
    other = _runner(core, owner, name="r2")
    session = _open(core, owner)
    with pytest.raises(Exception, match="no console"):
        consoles.join(core, core.store.runner(other.id), session.id)
    consoles.join(core, core.store.runner(runner.id), session.id)
    with pytest.raises(Conflict, match="no longer waits"):
        consoles.join(core, core.store.runner(runner.id), session.id)


def test_a_restart_closes_the_consoles_the_last_process_relayed(core, owner):
    runner = _runner(core, owner)
    session = _open(core, owner)
    consoles.join(core, core.store.runner(runner.id), session.id)
    assert consoles.close_left_open(core) == 1
    assert core.store.console(session.id).reason == consoles.RESTARTED


def test_a_runner_whose_gg_serves_no_consoles_is_refused_with_a_sentence(core, owner):
    make_runner(core, owner)  # its inventory names no features: an older gg
    with pytest.raises(Conflict, match="runs a gg that serves no consoles: upgrade gg on it"):
        _open(core, owner)
