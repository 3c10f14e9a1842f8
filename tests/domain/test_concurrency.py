"""Concurrency keys: one pure rule for the matcher, the waiting sentence and gg plan."""

from __future__ import annotations

import pytest

from gg.domain import concurrency
from gg.domain.concurrency import Concurrency, Keys, held
from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import Flight
from gg.domain.matching import Seat, assign
from gg.domain.plan import build_plan
from gg.domain.runners import Runner
from gg.domain.waiting import Context, why_waiting


def flight(fid: str, **kw) -> Flight:
    return Flight(id=fid, command=["true"], **{"opened_by": "p_1", "opened_at": 0.0, **kw})


def seat(rid: str, live: int = 0, **runner) -> Seat:
    return Seat(Runner(id=rid, name=rid, **runner), {}, live, online=True)


def test_key_and_count_are_parsed_and_bad_ones_refused_with_one_sentence():
    assert concurrency.parse("deploy-prod") == Concurrency("deploy-prod", 1)
    assert concurrency.parse("deploy-prod:3", True) == Concurrency("deploy-prod", 3, True)
    for text, words in (("", "needs a key"), (":2", "needs a key"), ("a b", "no spaces"),
                        ("k:0", "N is a whole number"), ("k:x", "N is a whole number"),
                        ("k:-1", "N is a whole number"), ("a:b:2", "no spaces, colons"),
                        ("k" * 201, "at most 200")):
        with pytest.raises(ValueError, match=words):
            concurrency.parse(text)


def test_a_grace_is_above_zero_and_at_most_ten_minutes():
    assert concurrency.grace_problem(1.0) is None and concurrency.grace_problem(600) is None
    assert "at most 10 minutes" in concurrency.grace_problem(601)
    assert "longer than 0s" in concurrency.grace_problem(0)
    assert FlightSpec(command=("x",), grace=700).problem().startswith("--grace is at most")
    assert "N is a whole number" in FlightSpec(command=("x",),
                                               concurrency={"key": "k", "limit": 0}).problem()


def test_the_rule_holds_a_flight_back_while_its_key_has_its_limit_flying():
    assert held(None, ["f_a"]) is None
    assert held(Concurrency("k", 2), ["f_a"]) is None
    hold = held(Concurrency("k", 1), ["f_a"])
    assert hold.sentence == "waiting: 1 flight with concurrency key k is flying (limit 1): f_a"
    assert held(Concurrency("k", 2), ["f_a", "f_b"]).sentence == (
        "waiting: 2 flights with concurrency key k are flying (limit 2): f_a, f_b")


def test_the_matcher_plans_no_more_of_a_key_than_its_limit_and_other_flights_still_go():
    flights = [flight(f"f_{i}", opened_at=float(i)) for i in range(4)] + [
        flight("f_free", opened_at=9.0)]
    seats = [seat(f"r_{i}") for i in range(5)]
    one = Keys({f"f_{i}": Concurrency("k") for i in range(4)}, {})
    assert [a.flight.id for a in assign(flights, seats, keys=one)] == ["f_0", "f_free"]
    two = Keys({f"f_{i}": Concurrency("k", 2) for i in range(4)}, {})
    assert [a.flight.id for a in assign(flights, seats, keys=two)] == ["f_0", "f_1", "f_free"]
    busy = Keys(one.of, {"k": ["f_flying"]})
    assert [a.flight.id for a in assign(flights, seats, keys=busy)] == ["f_free"]
    assert busy.flying == {"k": ["f_flying"]}  # the pass counted on a fork


def test_the_waiting_sentence_is_the_rules_and_comes_before_the_runner_rungs():
    f = flight("f_b")
    hold = held(Concurrency("deploy"), ["f_a"])
    reserved = seat("r_1", reserved=True, owner="p_other")
    said = why_waiting(f, [reserved], Context(held=hold))
    assert (said.code, said.sentence) == (
        "concurrency", "waiting: 1 flight with concurrency key deploy is flying (limit 1): f_a")
    assert why_waiting(f, [reserved], Context()).code == "reserved"


def test_the_plan_shows_the_key_and_is_not_startable_while_it_holds_the_flight_back():
    f = flight("f_b")
    c = Concurrency("deploy")
    free = build_plan(f, [seat("r_1")], Context(concurrency=c))
    assert free.startable
    assert any(i.need == "no other flight with concurrency key deploy is flying" and i.held
               for i in free.items)
    plan = build_plan(f, [seat("r_1")], Context(concurrency=c, held=held(c, ["f_a"])))
    assert not plan.startable and plan.waiting.code == "concurrency"
    assert any(i.need.startswith("no other flight") and not i.held for i in plan.items)
