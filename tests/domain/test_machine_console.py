"""Who may open a console on a machine, a console's flight, and its sentences (pure rules)."""

from __future__ import annotations

from gg.domain import machine_console as rules
from gg.domain.flights import Flight, Stage
from gg.domain.machine_console import ConsoleSession, ConsoleState
from gg.domain.people import Person
from gg.domain.runners import Runner

NOW = 1_000_000.0
ADMIN = Person(id="p_admin", name="ada", role="admin")
MEMBER = Person(id="p_mia", name="mia", role="member")
STRANGER = Person(id="p_sam", name="sam", role="member")


def _runner(**kw) -> Runner:
    return Runner(id="r_1", name="r1", **kw)


def test_the_claimed_owner_may_and_nobody_else_not_even_an_admin():
    claimed = _runner(ownership="claimed", owner="p_mia")
    assert rules.refusal(claimed, MEMBER, "mia") is None
    assert rules.refusal(claimed, ADMIN, "mia") == (
        "runner r1 is claimed by mia: only its owner may open a console on it")
    assert rules.refusal(claimed, STRANGER, "mia") == rules.refusal(claimed, ADMIN, "mia")


def test_an_admin_may_on_organisation_and_open_machines_a_member_may_not():
    organisation, open_ = _runner(ownership="organisation"), _runner(ownership="open")
    assert rules.refusal(organisation, ADMIN) is None
    assert rules.refusal(open_, ADMIN) is None
    assert rules.refusal(organisation, MEMBER) == (
        "runner r1 belongs to the organisation: only an admin may open a console on it")
    assert rules.refusal(open_, MEMBER) == (
        "runner r1 is open, not yours: claim it first (gg runner claim r1) to open a console "
        "on it")


def test_a_registered_runner_starts_as_the_organisations():
    assert rules.refusal(_runner(), MEMBER) is not None  # the default ownership
    assert rules.refusal(_runner(), ADMIN) is None


def test_no_console_reaches_a_retired_runner_nor_an_offline_one():
    assert rules.refusal(_runner(retired_at=NOW), ADMIN) == "runner r1 is retired: no console reaches it"
    assert rules.offline_refusal(_runner(), online=True) is None
    assert "runner r1 is offline" in rules.offline_refusal(_runner(), online=False)


def _flight(**kw) -> Flight:
    values = dict(id="f_1", command=["sleep 60"], opened_by="p_mia", opened_at=NOW,
                  attended=True, stage=Stage.FLYING, lease_runner="r_1")
    return Flight(**{**values, **kw})


def test_a_console_joins_only_an_attended_flight_flying_on_that_runner():
    runner = _runner()
    assert rules.flight_refusal(_flight(), "f_1", runner) is None
    assert rules.flight_refusal(None, "f_9", runner) == "no flight f_9"
    assert "is not attended" in rules.flight_refusal(_flight(attended=False), "f_1", runner)
    assert rules.flight_refusal(_flight(stage=Stage.LANDED, lease_runner=None), "f_1", runner) == (
        "flight f_1 is not flying on runner r1 (it is landed): a console joins a flight only "
        "while it flies there")
    assert "(it is on another runner)" in rules.flight_refusal(_flight(lease_runner="r_2"),
                                                               "f_1", runner)


def test_a_runner_checks_in_every_console_interval_while_a_console_waits():
    assert rules.check_in_interval(15.0, 1.0, waiting=True) == 1.0
    assert rules.check_in_interval(15.0, 1.0, waiting=False) == 15.0
    assert rules.check_in_interval(0.5, 1.0, waiting=True) == 0.5  # never slower than usual


def test_a_consoles_state_and_how_long_it_was_open():
    waiting = ConsoleSession(id="c_1", runner_id="r_1", person_id="p", person_name="mia",
                             opened_at=NOW)
    assert waiting.state == ConsoleState.WAITING and rules.duration(waiting, NOW + 5) == 0.0
    joined = ConsoleSession(**{**waiting.__dict__, "joined_at": NOW + 1})
    assert joined.state == ConsoleState.JOINED and rules.duration(joined, NOW + 5) == 4.0
    closed = ConsoleSession(**{**joined.__dict__, "closed_at": NOW + 3})
    assert closed.state == ConsoleState.CLOSED and rules.duration(closed, NOW + 50) == 2.0


def test_the_person_reads_why_it_waits_and_why_it_ended():
    assert rules.waiting_sentence("r1", parked=True, check_in_interval=15) == (
        "waiting: runner r1 was told a console waits; it dials in now")
    assert rules.waiting_sentence("r1", parked=False, check_in_interval=15) == (
        "waiting: runner r1 hears of the console at its next check-in (within 15s)")
    assert rules.not_joined_sentence("r1", 40).startswith(
        "runner r1 did not join the console within 40s")


def test_only_a_runner_whose_inventory_names_the_console_feature_serves_consoles():
    assert rules.feature_refusal(_runner(inventory={"features": ["console"]})) is None
    assert rules.feature_refusal(_runner(inventory={})) == (
        "runner r1 runs a gg that serves no consoles: upgrade gg on it and restart it")
    assert rules.feature_refusal(_runner(inventory={"features": "console"})) is not None
