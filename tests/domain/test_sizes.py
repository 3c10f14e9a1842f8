"""Placement by size: a runner is offered a flight only while the flight's limits fit what
the flights it flies leave free of its cores and memory; the waiting sentence and ``gg plan``
say which resource is short, on which runner there is most, and who can act."""

from __future__ import annotations

from gg.domain.flights import Flight
from gg.domain.limits import Limits
from gg.domain.matching import Block, Seat, assign, blockers
from gg.domain.plan import ADMIN, OPENER, OWNER, build_plan
from gg.domain.runners import Runner
from gg.domain.sizes import Room, Size, amount, room, runner_size, short
from gg.domain.waiting import why_waiting

G = 1024 ** 3


def flight(fid: str = "f_1", **kw) -> Flight:
    return Flight(id=fid, command=["true"], **{"opened_by": "p_1", "opened_at": 0.0, **kw})


def sized_seat(name: str, *, cpus: float = 4, memory: int = 8 * G,
               flying: tuple[Limits | None, ...] = (), policy: dict | None = None,
               asked: dict[str, Limits] | None = None, workers: int = 4,
               owner: str | None = None) -> Seat:
    runner = Runner(id="r_" + name, name=name, workers=workers, policy=dict(policy or {}),
                    inventory={"cpu_count": cpus, "memory_total": memory}, owner=owner)
    return Seat(runner, {}, len(flying), online=True,
                room=room(runner.inventory, runner.policy, flying), sizes=asked or {})


# -- the rule ----------------------------------------------------------------------------------


def test_a_runners_size_is_its_operators_setting_else_the_hosts_and_none_when_unreported():
    assert runner_size({"cpu_count": 8, "memory_total": 16 * G}) == Size(8, 16 * G)
    assert runner_size({"cpu_count": 8, "memory_total": 16 * G,
                        "size": {"cpus": 2}}) == Size(2, 16 * G)
    assert runner_size({"cpu_count": 8, "memory_total": 16 * G,
                        "size": {"cpus": 1.5, "memory": 4 * G}}) == Size(1.5, 4 * G)
    assert runner_size({}) is None
    assert runner_size({"cpu_count": "many", "memory_total": 1}) is None


def test_room_is_the_size_less_what_its_flights_asked_or_got_from_the_policy_defaults():
    r = room({"cpu_count": 4, "memory_total": 8 * G}, {"cpus": 1, "memory": G},
             [Limits(cpus=2, memory=4 * G), Limits(), None, Limits(memory=G)])
    # asked 2 cores 4G; nothing asked: the defaults (1, 1G) twice; 1G asked with 1 core default
    assert r is not None
    assert r.free == Size(4 - 2 - 1 - 1 - 1, 8 * G - 4 * G - G - G - G)
    assert r.size_of(None) == Size(1, G)
    assert r.size_of(Limits(cpus=0.5)) == Size(0.5, G)


def test_a_flight_with_no_limit_and_no_default_is_of_size_zero_and_always_fits():
    full = sized_seat("r1", cpus=1, memory=G, flying=(Limits(cpus=1, memory=G),))
    assert blockers(flight(), full) == []
    assert full.room is not None and full.room.free == Size(0, 0)


def test_a_flight_fits_while_its_limits_are_within_what_is_free():
    asked = {"f_1": Limits(cpus=2, memory=4 * G)}
    assert blockers(flight(), sized_seat("r1", asked=asked)) == []
    exact = sized_seat("r1", flying=(Limits(cpus=2, memory=4 * G),), asked=asked)
    assert blockers(flight(), exact) == []  # exactly the room left
    over = sized_seat("r1", flying=(Limits(cpus=2.5),), asked=asked)
    assert blockers(flight(), over) == [Block.NO_ROOM]


def test_a_flight_bigger_than_the_whole_runner_is_too_small_not_no_room():
    asked = {"f_1": Limits(memory=64 * G)}
    assert blockers(flight(), sized_seat("r1", asked=asked)) == [Block.TOO_SMALL]


def test_the_policy_default_is_a_flights_size_where_it_asked_none():
    s = sized_seat("r1", cpus=2, flying=(None,), policy={"cpus": 1.5})
    assert blockers(flight(), s) == [Block.NO_ROOM]  # 1.5 flies, 0.5 is free


def test_fractions_of_cores_add_up_without_rounding_against_the_flight():
    flying = tuple(Limits(cpus=0.1) for _ in range(7))
    s = sized_seat("r1", cpus=1, flying=flying, asked={"f_1": Limits(cpus=0.3)}, workers=8)
    assert blockers(flight(), s) == []


def test_the_matcher_passes_a_runner_without_room_and_offers_the_next():
    asked = {"f_big": Limits(cpus=3)}
    small = sized_seat("small", cpus=2, asked=asked)
    big = sized_seat("big", cpus=4, asked=asked)
    plan = assign([flight("f_big")], [small, big])
    assert [(a.flight.id, a.seat.runner.name) for a in plan] == [("f_big", "big")]


def test_a_runner_that_reports_no_size_is_never_held_back_by_size():
    runner = Runner(id="r_1", name="r1", workers=4)
    s = Seat(runner, {}, 0, online=True, sizes={"f_1": Limits(memory=64 * G)})
    assert blockers(flight(), s) == []


# -- the sentences ------------------------------------------------------------------------------


def test_the_waiting_sentence_names_the_memory_short_and_the_runner_with_most_free():
    asked = {"f_1": Limits(memory=8 * G)}
    seats = [sized_seat("r1", memory=16 * G, flying=(Limits(memory=14 * G),), asked=asked),
             sized_seat("r3", memory=16 * G, flying=(Limits(memory=12 * G),), asked=asked)]
    why = why_waiting(flight(), seats)
    assert why is not None
    assert why.code == "no_room"
    assert why.sentence == "waiting: no runner has 8G of memory free (most: 4G on r3)"
    assert "the runner's owner can finish or cancel what r3 flies" in why.remedy
    assert "an admin can bring up a bigger runner" in why.remedy
    assert "its opener can ask for less (gg cancel f_1, then gg fly with a smaller --memory)" \
        in why.remedy


def test_the_waiting_sentence_for_cores_says_core_or_cores():
    asked = {"f_1": Limits(cpus=2)}
    seats = [sized_seat("r3", cpus=4, flying=(Limits(cpus=2.5),), asked=asked)]
    why = why_waiting(flight(), seats)
    assert why is not None
    assert why.sentence == "waiting: no runner has 2 cores free (most: 1.5 on r3)"
    one = why_waiting(flight(), [sized_seat("r3", cpus=2, flying=(Limits(cpus=2),),
                                            asked={"f_1": Limits(cpus=1)})])
    assert one is not None and one.sentence == "waiting: no runner has 1 core free (most: 0 on r3)"


def test_a_flight_larger_than_every_runner_says_it_never_starts_as_it_is():
    asked = {"f_1": Limits(memory=64 * G)}
    seats = [sized_seat("r1", memory=4 * G, asked=asked),
             sized_seat("r3", memory=8 * G, asked=asked, workers=1,
                        flying=(Limits(memory=G),))]  # busy too: the size is said first
    why = why_waiting(flight(), seats)
    assert why is not None
    assert why.code == "too_small"
    assert why.sentence == "waiting: no runner has 64G of memory (most: 8G on r3)"
    assert "finish or cancel" not in why.remedy  # ending its flights cannot help
    assert "bigger runner" in why.remedy and "ask for less" in why.remedy


def test_a_runner_too_small_does_not_count_and_a_busy_big_one_is_rung_six():
    asked = {"f_1": Limits(memory=16 * G)}
    seats = [sized_seat("small", memory=8 * G, asked=asked),
             sized_seat("big", memory=64 * G, asked=asked, workers=1, flying=(None,))]
    why = why_waiting(flight(), seats)
    assert why is not None and why.sentence == "waiting: every runner is busy"


def test_room_is_said_only_when_not_every_runner_is_in_a_state():
    asked = {"f_1": Limits(cpus=2)}
    busy = sized_seat("busy", cpus=8, workers=1, flying=(None,), asked=asked)
    roomless = sized_seat("r3", cpus=4, flying=(Limits(cpus=3),), asked=asked)
    why = why_waiting(flight(), [busy, roomless])
    assert why is not None and why.sentence == "waiting: no runner has 2 cores free (most: 1 on r3)"
    why = why_waiting(flight(), [busy])
    assert why is not None and why.sentence == "waiting: every runner is busy"


def test_each_resource_somewhere_but_never_both_on_one_runner_says_at_once():
    asked = {"f_1": Limits(cpus=2, memory=8 * G)}
    seats = [sized_seat("cores", cpus=4, memory=16 * G, flying=(Limits(memory=12 * G),),
                        asked=asked),
             sized_seat("mem", cpus=4, memory=16 * G, flying=(Limits(cpus=3),), asked=asked)]
    why = why_waiting(flight(), seats)
    assert why is not None
    assert why.sentence == "waiting: no runner has 2 cores and 8G of memory free at once"


def test_most_picks_the_runner_with_the_most_and_the_first_name_on_a_tie():
    want = Size(0, 8 * G)
    got = short(want, [("b", Size(1, 2 * G)), ("a", Size(1, 2 * G)), ("c", Size(1, G))])
    assert (got.resource, got.most_name, got.most) == ("memory", "a", 2 * G)


def test_amounts_read_as_people_write_them():
    assert amount("memory", 4 * G) == "4G"
    assert amount("memory", 1536 * 1024 ** 2) == "1536M"
    assert amount("memory", int(7.64 * G)) == "7.6G"
    assert amount("memory", 0) == "0"
    assert amount("cpus", 1.5) == "1.5"
    assert amount("cpus", -0.5) == "0"


def test_gg_plan_says_who_can_make_room_and_agrees_with_the_sentence():
    asked = {"f_1": Limits(memory=8 * G)}
    seats = [sized_seat("r3", memory=16 * G, flying=(Limits(memory=12 * G),), asked=asked,
                        owner="p_owner")]
    plan = build_plan(flight(), seats)
    assert plan.startable is False
    assert plan.waiting is not None and plan.waiting.code == "no_room"
    capacity = plan.items[-1]
    part = next(p for p in capacity.parts if "free" in p.need)
    assert part.need == "runner r3 has 8G of memory free"
    whos = [w.who for w in part.ways]
    assert OWNER in whos and ADMIN in whos and OPENER in whos
    assert part.note == "4G of 16G of memory free; what it flies frees its share when it ends"


def test_gg_plan_for_a_flight_bigger_than_the_runner_offers_no_waiting_for_room():
    seats = [sized_seat("r3", memory=8 * G, asked={"f_1": Limits(memory=64 * G)})]
    plan = build_plan(flight(), seats)
    part = next(p for p in plan.items[-1].parts if "as big as" in p.need)
    assert [w.who for w in part.ways] == [ADMIN, OPENER]


def test_room_is_frozen_and_hashable_so_a_seat_can_be_shared():
    r = Room(Size(1, G), Size(1, G))
    assert hash(r) == hash(Room(Size(1, G), Size(1, G)))
