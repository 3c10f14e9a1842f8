"""The pure rules of ``--after`` (gg.domain.dependencies) and their rung of the ladder."""

from __future__ import annotations

from gg.domain import dependencies as rules
from gg.domain.dependencies import Dependency
from gg.domain.flights import Flight
from gg.domain.waiting import Context, OpenGate, why_waiting


def dep(id: str, stage: str, title: str = "", reason: str | None = None) -> Dependency:
    return Dependency(id=id, title=title, stage=stage, ended_reason=reason)


def test_naming_a_flight_twice_keeps_it_once_in_the_order_given():
    assert rules.distinct(["f_b", "f_a", "f_b"]) == ["f_b", "f_a"]


def test_a_dependency_ends_as_failed_timed_out_or_was_cancelled_and_landing_is_no_failure():
    assert rules.ended_word("failed", "exit 1") == "failed"
    assert rules.ended_word("failed", "timed out after 30s") == "timed out"
    assert rules.ended_word("cancelled", "cancelled by ada") == "was cancelled"
    assert rules.ended_word("landed", None) is None
    assert rules.ended_word("flying", None) is None


def test_only_landing_releases_a_dependent_unless_any_ending_will_do():
    deps = [dep("f_a", "landed"), dep("f_b", "failed"), dep("f_c", "flying")]
    assert rules.holding(deps, any_end=False) == deps[1]
    assert rules.holding(deps, any_end=True) == deps[2]
    assert rules.holding(deps[:2], any_end=True) is None


def test_opening_is_refused_for_an_unknown_flight_too_many_or_one_already_failed():
    found = {"f_a": dep("f_a", "landed"), "f_b": dep("f_b", "cancelled")}
    assert rules.open_refusal(["f_a"], found, False) is None
    assert rules.open_refusal(["f_x"], found, False) == (
        "--after: no flight f_x in this organisation")
    assert rules.open_refusal(["f_a", "f_b"], found, False).startswith(
        "dependency f_b already cancelled")
    assert rules.open_refusal(["f_a", "f_b"], found, True) is None
    many = [f"f_{i}" for i in range(rules.MAX_DEPENDENCIES + 1)]
    assert rules.open_refusal(many, {}, False) == (
        "--after names 101 flights; a flight may depend on at most 100")
    assert rules.open_refusal(many[:-1], {i: dep(i, "ready") for i in many}, False) is None


def test_the_dependency_rung_names_the_first_unfinished_one_after_gates_and_before_rung_1():
    flight = Flight(id="f_t", command=["true"], opened_by="p", opened_at=0.0)
    held = Context(held_by=dep("f_b", "flying", "build"))
    assert why_waiting(flight, [], held).sentence == "waiting: f_b (build) is still flying"
    waiting = Context(held_by=dep("f_b", "ready"), after_any=True)
    said = why_waiting(flight, [], waiting)
    assert (said.code, said.sentence) == ("dependency", "waiting: f_b is still waiting")
    assert "when f_b ends" in said.remedy
    gated = Context(held_by=dep("f_b", "ready"),
                    open_gates=[OpenGate("g_1", "environment prod", "an admin")])
    assert why_waiting(flight, [], gated).code == "gated"
    assert why_waiting(flight, [], Context()).code == "no_runner"  # rung 7 without it


def test_a_dependents_reason_names_the_flight_that_failed_first():
    assert rules.cancel_reason("f_b", "timed out") == "dependency f_b timed out"
