"""Priorities and fair share through the use cases, on a real store with a hand-moved clock:
who may ask for high, the order claims take, a queue read deep enough, and the sentence."""

from __future__ import annotations

import pytest

from gg.control import flights, leases
from gg.control.plan import plan_for
from gg.domain.flight_spec import FlightSpec
from gg.errors import Forbidden
from gg.settings import Settings

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


def fly(core, person, clock, **kw):
    clock.advance(1)
    return flights.open_flight(core, person, FlightSpec(command=["true"], **kw))


def claim_and_land(core, clock, runner):
    clock.advance(1)
    check_in(core, runner)  # the clock moved on: it is still online
    flight, grant = leases.try_claim(core, runner.id)
    leases.hand_back(core, runner, flight.id, epoch=grant.epoch, outcome="landed", exit_code=0,
                     reason=None, key=f"{flight.id}:{grant.epoch}")
    return flight.id


def test_only_an_admin_may_ask_for_high_by_default(core, owner, ada, clock):
    with pytest.raises(Forbidden) as refused:
        fly(core, ada, clock, priority="high")
    assert str(refused.value) == "only an admin may open a flight with priority high on this server"
    assert fly(core, owner, clock, priority="high").priority == "high"
    assert fly(core, ada, clock, priority="low").priority == "low"
    assert fly(core, ada, clock).priority == "normal"


def test_a_server_may_let_everyone_ask_for_high(core, ada, clock):
    from dataclasses import replace

    core.settings = replace(core.settings, high_priority="everyone")
    assert fly(core, ada, clock, priority="high").priority == "high"
    with pytest.raises(ValueError, match="GG_HIGH_PRIORITY"):
        Settings.from_env({"GG_HIGH_PRIORITY": "members"})
    assert Settings.from_env({"GG_HIGH_PRIORITY": "everyone"}).high_priority == "everyone"


def test_claims_take_turns_between_people_and_high_goes_first(core, owner, ada, bob, clock):
    r = make_runner(core, owner)
    burst = [fly(core, ada, clock).id for _ in range(30)]
    single = fly(core, bob, clock).id
    assert claim_and_land(core, clock, r) == burst[0]  # nobody served yet: the oldest head
    assert claim_and_land(core, clock, r) == single  # ada was just served; bob's turn
    assert claim_and_land(core, clock, r) == burst[1]
    urgent = fly(core, owner, clock, priority="high").id
    assert claim_and_land(core, clock, r) == urgent
    second = [fly(core, bob, clock).id for _ in range(2)]
    # bob was served longer ago than ada: bob, ada, bob, ada...
    assert [claim_and_land(core, clock, r) for _ in range(4)] == [second[0], burst[2], second[1],
                                                           burst[3]]


def test_a_claim_reads_past_a_long_burst_it_cannot_take(core, owner, ada, bob, clock):
    """The owner's 100 high flights need a label this runner lacks: the high one the owner
    opened after them is still found first, then the owner's normal one and bob's low one."""
    plain = make_runner(core, owner, "plain")
    for _ in range(100):
        fly(core, owner, clock, priority="high", labels={"gpu": "yes"})
    low = fly(core, bob, clock, priority="low").id
    mine = fly(core, owner, clock).id
    urgent = fly(core, owner, clock, priority="high").id  # the 101st of the owner's high ones
    assert claim_and_land(core, clock, plain) == urgent
    assert claim_and_land(core, clock, plain) == mine
    assert claim_and_land(core, clock, plain) == low


def test_a_claim_no_flight_of_the_queue_is_for_reads_only_the_first_turn(core, owner, ada, clock):
    """300 ready flights ask for a label neither runner has, and one runner is busy: their
    claims take nothing and read the queue's first turn and its kinds, never the whole queue
    (which cost 0.5 s of CPU per heartbeat with 5,000 ready); a flight one of them may take,
    opened last behind the burst, is still found."""
    plain = make_runner(core, owner, "plain")
    busy = make_runner(core, owner, "busy")
    mine = fly(core, owner, clock)
    clock.advance(1)
    check_in(core, busy)
    held, _ = leases.try_claim(core, busy.id)
    assert held.id == mine.id  # busy's one worker flies it
    for _ in range(300):  # at one instant: busy's lease must not expire meanwhile
        flights.open_flight(core, ada, FlightSpec(command=["true"], labels={"gpu": "yes"}))
    depths: list[int] = []
    read = core.store.ready_turns
    core.store.ready_turns = lambda depth: (depths.append(depth), read(depth))[1]
    clock.advance(1)
    for r in (plain, busy):
        check_in(core, r)
        assert leases.try_claim(core, r.id) is None
    assert depths == [2, 2]  # one claim reads its head and one more of each turn
    last = fly(core, ada, clock).id
    check_in(core, plain)
    assert leases.try_claim(core, plain.id)[0].id == last


def test_the_waiting_sentence_and_the_plan_name_the_higher_priority_flights_ahead(
        core, owner, ada, clock):
    r = make_runner(core, owner)
    fly(core, owner, clock)  # taken: the runner's one slot is busy
    leases.try_claim(core, r.id)
    low = fly(core, ada, clock, priority="low")
    for _ in range(3):
        fly(core, ada, clock)
    fly(core, owner, clock, priority="high")
    fly(core, ada, clock, priority="low", labels={"gpu": "yes"})  # wants another runner
    row = flights.show_flight(core, low.id)
    assert row["waiting"] == "waiting: 4 flights of higher priority are ahead of it"
    assert row["priority"] == "low"
    plan = plan_for(core, low.id)
    assert plan["waiting"] == row["waiting"]
    item = [i for i in plan["items"] if i["need"] == "no flight of higher priority is ahead of it"]
    assert item and item[0]["held"] is False
    # A normal flight has only the high one ahead of it.
    normal = fly(core, ada, clock)
    assert flights.show_flight(core, normal.id)["waiting"] == (
        "waiting: 1 flight of higher priority is ahead of it")
    # When the runner is not checking in, that is the reason, not the queue.
    clock.advance(core.settings.offline_after + 1)
    assert "higher priority" not in flights.show_flight(core, low.id)["waiting"]
