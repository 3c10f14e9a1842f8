"""The flight lifecycle as a table: every (stage, event) pair is either one expected change or
refused, and nothing else."""

from __future__ import annotations

import itertools

import pytest

from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import (
    TRANSITIONS,
    Change,
    Event,
    Fact,
    Flight,
    Grant,
    IllegalTransition,
    Record,
    Stage,
    opened,
    transition,
)
from gg.domain.retries import Decision

NOW = 200.0
ACTOR = "someone"


def flight(stage: Stage, **kw) -> Flight:
    base = dict(id="f_1", command=["true"], opened_by="p_1", opened_at=0.0, stage=stage.value,
                epoch=4, attempt=2, lease_runner="r_a", lease_expires_at=160.0,
                runner_target="r_t", gates=["g_1"])
    base.update(kw)
    return Flight(**base)


DETAILS = {
    Event.GATED: dict(gates=["g_1", "g_2"]),
    Event.UNGATED: {},
    Event.GRANTED: dict(runner_id="r_b", ttl=60.0),
    Event.RENEWED: dict(ttl=60.0),
    Event.RETURNED: dict(runner_id="r_a", exit_code=None, reason="no disk", key="k"),
    Event.EXPIRED: dict(max_expiries=3),
    Event.LANDED: dict(runner_id="r_a", exit_code=0, reason=None, key="k"),
    Event.FAILED: dict(runner_id="r_a", exit_code=3, reason="exit 3", key="k"),
    Event.CANCELLED: dict(reason="cancelled by ann"),
    Event.NOT_TAKEN: dict(runner_name="t", claim_wait=30.0),
    Event.CONFIRMED: {},
}


def expected(f: Flight, event: Event) -> Change | None:
    """The change each legal pair makes, written out by hand; None where it is refused."""
    gated_or_ready = f.stage in ("gated", "ready")
    if event is Event.GATED and gated_or_ready:
        return Change(event, Stage.GATED, {"gates": ["g_1", "g_2"]})
    if event is Event.UNGATED and f.stage == "gated":
        return Change(event, Stage.READY, {"gates": []})
    if event is Event.GRANTED and f.stage == "ready":
        return Change(event, Stage.FLYING,
                      {"epoch": 5, "lease_runner": "r_b", "lease_granted_at": NOW,
                       "lease_expires_at": NOW + 60, "attempt": 3},
                      records=(Record("info:flight:claimed", ACTOR, "r_b",
                                      {"epoch": 5, "attempt": 3}),),
                      grant=Grant("f_1", "r_b", 5, NOW, NOW + 60))
    if f.stage == "flying":
        if event is Event.RENEWED:
            return Change(event, Stage.FLYING, {"lease_expires_at": NOW + 60})
        if event is Event.RETURNED:
            return Change(event, Stage.READY, {"lease_expires_at": None},
                          Fact("returned", {"outcome": "returned", "exit_code": None,
                                            "reason": "no disk"}, 4, "r_a", "k"),
                          (Record("info:flight:returned", ACTOR, "r_a", {"reason": "no disk"}),))
        if event is Event.EXPIRED:
            return Change(event, Stage.READY, {"expiries": 1, "lease_expires_at": None},
                          Fact("expired", {"runner": "r_a", "expired_at": 160.0, "expiries": 1}, 4),
                          (Record("info:flight:expired", ACTOR, "r_a",
                                  {"epoch": 4, "expiries": 1}),))
        if event in (Event.LANDED, Event.FAILED):
            code, reason = (0, None) if event is Event.LANDED else (3, "exit 3")
            return Change(event, Stage(event.value),
                          {"outcome": event.value, "exit_code": code, "ended_at": NOW,
                           "ended_reason": reason, "lease_expires_at": None},
                          Fact("exit", {"outcome": event.value, "exit_code": code,
                                        "reason": reason}, 4, "r_a", "k"),
                          (Record(f"info:flight:{event.value}", ACTOR, "r_a",
                                  {"exit_code": code}),))
    if event is Event.CANCELLED and not Stage(f.stage).final:
        return Change(event, Stage.CANCELLED,
                      {"outcome": "cancelled", "ended_at": NOW,
                       "ended_reason": "cancelled by ann"},
                      records=(Record("info:flight:cancelled", ACTOR, None, {"was": f.stage}),))
    if event is Event.NOT_TAKEN and gated_or_ready:
        return Change(event, Stage.FAILED,
                      {"outcome": "failed", "ended_at": NOW, "ended_reason": "not taken promptly"},
                      Fact("note", {"text": "not taken promptly: runner t did not take this "
                                            "attended flight within 30s"}, 4),
                      (Record("info:flight:failed", ACTOR, "r_t",
                              {"reason": "not taken promptly"}),))
    if event is Event.CONFIRMED and gated_or_ready:
        reason = "the machine confirmed every missing item"
        return Change(event, Stage.LANDED,
                      {"outcome": "landed", "exit_code": 0, "ended_at": NOW,
                       "ended_reason": reason, "gates": []},
                      Fact("note", {"text": reason}, 0),
                      (Record("info:flight:landed", ACTOR, "r_t",
                              {"exit_code": 0, "flight_kind": "work"}),))
    return None


@pytest.mark.parametrize("stage,event", list(itertools.product(Stage, Event)),
                         ids=lambda v: v.value)
def test_every_stage_and_event_pair_is_one_expected_change_or_refused(stage, event):
    f = flight(stage)
    want = expected(f, event)
    if want is None:
        with pytest.raises(IllegalTransition) as err:
            transition(f, event, NOW, actor=ACTOR, **DETAILS[event])
        assert err.value.status == 409 and err.value.code == "illegal_transition"
        assert (stage, event) not in {(s, e) for s, e, _ in TRANSITIONS}
    else:
        assert transition(f, event, NOW, actor=ACTOR, **DETAILS[event]) == want
        assert (stage, event, want.to) in TRANSITIONS


def test_a_lease_lost_max_expiries_times_ends_the_flight_failed():
    f = flight(Stage.FLYING, expiries=2)
    change = transition(f, Event.EXPIRED, NOW, actor=ACTOR, max_expiries=3)
    assert change.to is Stage.FAILED
    assert change.values == {"expiries": 3, "lease_expires_at": None, "outcome": "failed",
                             "ended_at": NOW, "ended_reason": "lost 3 times"}
    assert [r.kind for r in change.records] == ["info:flight:expired", "info:flight:failed"]
    assert change.records[1] == Record("info:flight:failed", ACTOR, None,
                                       {"reason": "lost 3 times"})


def test_the_table_has_an_edge_for_every_change_transition_can_make_and_no_other():
    made = set()
    for stage, event in itertools.product(Stage, Event):
        for extra, more in (({}, {}), ({"expiries": 2}, {}), ({}, RETRIED.get(event, {}))):
            try:
                change = transition(flight(stage, **extra), event, NOW, actor=ACTOR,
                                    **{**DETAILS[event], **more})
            except IllegalTransition:
                continue
            made.add((stage, event, change.to))
    assert made == set(TRANSITIONS)


RETRIED = {Event.FAILED: dict(retry=Decision(2, 3, "after exit 3", offer_at=NOW + 20.0))}


def test_a_failed_attempt_with_a_retry_left_goes_back_to_ready_with_its_exit_and_why():
    f = flight(Stage.FLYING)
    change = transition(f, Event.FAILED, NOW, actor=ACTOR, **DETAILS[Event.FAILED],
                        **RETRIED[Event.FAILED])
    assert change.to is Stage.READY
    assert change.values == {"lease_expires_at": None}  # not ended: no outcome, no ended_at
    assert change.fact == Fact("exit", {"outcome": "failed", "exit_code": 3, "reason": "exit 3",
                                        "retry": "retry 2 of 3 after exit 3"}, 4, "r_a", "k")
    assert change.records == (Record("info:flight:retried", ACTOR, "r_a",
                                     {"epoch": 4, "retry": 2, "of": 3, "exit_code": 3,
                                      "reason": "exit 3", "offer_at": NOW + 20.0}),)
    assert change.grant is None  # the next grant is the new attempt, at epoch + 1


def test_only_a_failed_hand_back_can_be_retried():
    with pytest.raises(AssertionError):
        transition(flight(Stage.FLYING), Event.LANDED, NOW, actor=ACTOR,
                   **DETAILS[Event.LANDED], **RETRIED[Event.FAILED])


def test_no_edge_leaves_a_final_stage():
    assert not [t for t in TRANSITIONS if t[0].final]


def test_a_flight_is_born_gated_when_held_and_ready_otherwise():
    spec = FlightSpec(command=("true",))
    base = dict(id="f_1", opened_by="p_1", opened_at=0.0)
    assert opened(spec, held=True, **base).stage == "gated"
    assert opened(spec, held=False, **base).stage == "ready"
