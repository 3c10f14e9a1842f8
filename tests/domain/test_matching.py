"""The matcher plans and writes nothing: highest priority first, then the openers in turn,
oldest first within each; first fitting seat, one each."""

from __future__ import annotations

from gg.domain.flights import Flight
from gg.domain.matching import Assignment, Seat, ahead, assign, order
from gg.domain.runners import Runner


def flight(fid: str, **kw) -> Flight:
    return Flight(id=fid, command=["true"], **{"opened_by": "p_1", "opened_at": 0.0, **kw})


def seat(rid: str, labels: dict | None = None, live: int = 0) -> Seat:
    runner = Runner(id=rid, name=rid, labels=dict(labels or {}))
    return Seat(runner, dict(runner.labels), live, online=True)


def test_the_oldest_flight_goes_to_the_first_seat_that_may_be_offered_it():
    gpu = seat("r_gpu", {"gpu": "yes"})
    plain = seat("r_plain")
    flights = [flight("f_1", requires={"gpu": "yes"}), flight("f_2"), flight("f_3")]
    plan = assign(flights, [plain, gpu])
    assert [(a.flight.id, a.seat.runner.id) for a in plan] == [("f_1", "r_gpu"),
                                                                ("f_2", "r_plain")]
    assert all(isinstance(a, Assignment) for a in plan)


def test_a_seat_takes_at_most_one_flight_and_a_busy_or_unfitting_seat_none():
    busy = seat("r_busy", live=1)
    plan = assign([flight("f_1"), flight("f_2")], [busy, seat("r_free")])
    assert [(a.flight.id, a.seat.runner.id) for a in plan] == [("f_1", "r_free")]
    assert assign([flight("f_1", stage="gated")], [seat("r_free")]) == []
    assert assign([flight("f_1")], []) == []


def test_a_higher_priority_flight_is_offered_first_whatever_its_age():
    flights = [flight("f_low", priority="low", opened_at=1.0),
               flight("f_normal", opened_at=2.0),
               flight("f_high", priority="high", opened_at=3.0)]
    assert [f.id for f in order(flights)] == ["f_high", "f_normal", "f_low"]
    plan = assign(flights, [seat("r_a")])
    assert [a.flight.id for a in plan] == ["f_high"]


def test_within_a_priority_the_openers_take_turns_oldest_first_within_each():
    ada = [flight(f"a_{i}", opened_by="p_ada", opened_at=float(i)) for i in range(1, 6)]
    bob = flight("b_1", opened_by="p_bob", opened_at=10.0)
    cy = [flight(f"c_{i}", opened_by="p_cy", opened_at=20.0 + i) for i in (2, 1)]
    ids = [f.id for f in order([*ada, bob, *cy])]
    # each person's oldest, then each one's second oldest...: a burst cannot starve one flight
    assert ids == ["a_1", "b_1", "c_1", "a_2", "c_2", "a_3", "a_4", "a_5"]
    plan = assign([*ada, bob], [seat("r_a"), seat("r_b")])
    assert [a.flight.id for a in plan] == ["a_1", "b_1"]


def test_in_each_round_the_person_served_longest_ago_goes_first():
    ada = [flight(f"a_{i}", opened_by="p_ada", opened_at=float(i)) for i in (1, 2)]
    bob = [flight(f"b_{i}", opened_by="p_bob", opened_at=10.0 + i) for i in (1, 2)]
    # ada's flights are older, but she was granted one just now and bob never was
    assert [f.id for f in order([*ada, *bob], {"p_ada": 50.0})] == ["b_1", "a_1", "b_2", "a_2"]
    assert [f.id for f in order([*ada, *bob], {"p_ada": 50.0, "p_bob": 60.0})] == [
        "a_1", "b_1", "a_2", "b_2"]
    assert [a.flight.id for a in assign([*ada, *bob], [seat("r_a")], {"p_ada": 50.0})] == ["b_1"]


def test_priority_outranks_the_turns_and_a_flight_no_seat_may_take_is_passed_over():
    flights = [flight("a_1", opened_by="p_ada", opened_at=1.0),
               flight("b_low", opened_by="p_bob", priority="low", opened_at=2.0),
               flight("b_gpu", opened_by="p_bob", priority="high", opened_at=3.0,
                      requires={"gpu": "yes"})]
    assert [f.id for f in order(flights)] == ["b_gpu", "a_1", "b_low"]
    assert [a.flight.id for a in assign(flights, [seat("r_plain")])] == ["a_1"]


def test_ahead_counts_higher_priority_flights_that_want_the_same_runners():
    busy = seat("r_busy", live=1)
    gpu = seat("r_gpu", {"gpu": "yes"}, live=1)
    low = flight("f_low", priority="low")
    ready = [(flight("f_high", priority="high"), 2), (flight("f_normal"), 1),
             (flight("f_gpu", priority="high", requires={"gpu": "yes"}), 5),
             (flight("f_low2", priority="low"), 7)]
    assert ahead(low, ready, [busy]) == 3  # the gpu ones want another runner; low is not higher
    assert ahead(flight("f_n"), ready, [busy]) == 2
    assert ahead(low, ready, [busy, gpu]) == 8  # the gpu runner could take it too
    assert ahead(flight("f_h", priority="high"), ready, [busy]) == 0
    offline = Seat(busy.runner, {}, 1, online=False)
    assert ahead(low, ready, [offline]) == 0  # it waits for the runner, not for them


def test_a_service_is_not_offered_a_runner_where_another_service_holds_its_port():
    from gg.domain.matching import Block, blockers
    from gg.domain.waiting import why_waiting

    wants = flight("f_2", kind="service", service={"generation": 1, "port": 8080})
    runner = Runner(id="r_1", name="r1", workers=4)
    held = Seat(runner, {}, 1, online=True, held_ports={8080: "f_1"})
    assert blockers(wants, held) == [Block.PORT_HELD]
    assert assign([wants], [held]) == []
    other_port = flight("f_3", kind="service", service={"generation": 1, "port": 9090})
    assert [a.flight.id for a in assign([wants, other_port], [held])] == ["f_3"]
    assert why_waiting(wants, [held]).sentence == (
        "waiting: port 8080 is held by service f_1 on every runner that could take it")
    free = Seat(Runner(id="r_2", name="r2"), {}, 0, online=True)
    assert [a.seat.runner.id for a in assign([wants], [held, free])] == ["r_2"]
