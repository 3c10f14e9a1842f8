"""The matcher plans and writes nothing: oldest flight first, first fitting seat, one each."""

from __future__ import annotations

from gg.domain.flights import Flight
from gg.domain.matching import Assignment, Seat, assign
from gg.domain.runners import Runner


def flight(fid: str, **kw) -> Flight:
    return Flight(id=fid, command=["true"], opened_by="p_1", opened_at=0.0, **kw)


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


def test_the_flights_are_read_only_until_every_seat_has_one():
    read = []

    def queue():
        for i in range(1, 100):
            read.append(i)
            yield flight(f"f_{i}")

    plan = assign(queue(), [seat("r_a"), seat("r_b")])
    assert [a.flight.id for a in plan] == ["f_1", "f_2"] and read == [1, 2]
    read.clear()
    assert assign(queue(), []) == [] and read == []
