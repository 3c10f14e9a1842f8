"""The waiting sentence for flights of higher priority, pure: said only when it is the reason."""

from __future__ import annotations

from gg.domain.flights import Flight
from gg.domain.matching import Seat
from gg.domain.plan import build_plan
from gg.domain.runners import Runner
from gg.domain.waiting import Context, why_waiting


def flight(fid: str, priority: str = "normal", **kw) -> Flight:
    return Flight(id=fid, command=["true"], opened_by="p_1", opened_at=0.0, priority=priority,
                  **kw)


def seat(workers: int, live: int, online: bool = True) -> Seat:
    runner = Runner(id="r_1", name="r1", workers=workers)
    return Seat(runner, {}, live, online)


HIGHER = Context(higher=[(flight("f_high", "high"), 2)])


def test_it_is_said_when_the_runner_is_busy_and_higher_flights_want_it():
    w = why_waiting(flight("f_1"), [seat(1, 1)], HIGHER)
    assert (w.code, w.sentence) == ("priority",
                                    "waiting: 2 flights of higher priority are ahead of it")
    plan = build_plan(flight("f_1"), [seat(1, 1)], HIGHER)
    assert [(i.need, i.held) for i in plan.items][-1] == (
        "no flight of higher priority is ahead of it", False)


def test_it_is_not_said_when_free_slots_outnumber_them_or_the_runner_is_away():
    assert why_waiting(flight("f_1"), [seat(3, 0)], HIGHER).code == "offerable"
    assert why_waiting(flight("f_1"), [seat(2, 0)], HIGHER).code == "priority"
    assert why_waiting(flight("f_1"), [seat(1, 1, online=False)], HIGHER).code == "all_offline"
    assert why_waiting(flight("f_1", "high"), [seat(1, 1)], HIGHER).code == "all_busy"
    plan = build_plan(flight("f_1"), [seat(3, 0)], HIGHER)
    assert "no flight of higher priority is ahead of it" not in [i.need for i in plan.items]


def test_only_admins_may_ask_for_high_unless_the_server_lets_everyone():
    from gg.domain.flights import priority_refusal

    assert priority_refusal("high", admin=False, high_for="admins") == (
        "only an admin may open a flight with priority high on this server")
    assert priority_refusal("high", admin=True, high_for="admins") is None
    assert priority_refusal("high", admin=False, high_for="everyone") is None
    assert priority_refusal("low", admin=False, high_for="admins") is None
