"""Who may approve or reject a flight, and when a flight needs an approval (pure rules)."""

from __future__ import annotations

from dataclasses import replace

from gg.domain import approvals
from gg.domain.flights import Flight, Stage
from gg.domain.gates import Gate, refusal_to_clear
from gg.domain.people import Person
from gg.domain.waiting import Context, OpenGate, why_waiting

ADMIN = Person(id="p_admin", name="root", role="admin")
ADA = Person(id="p_ada", name="ada", role="member")
BOB = Person(id="p_bob", name="bob", role="member")


def _gate(approver=None, approver_name=None) -> Gate:
    return Gate(id="g_1", kind="approval", subject="flight:f_1/approval", guards="the start",
                why="asked", clearer="approver", opened_at=1.0, flight_id="f_1",
                payload={"approver": approver, "approver_name": approver_name})


def test_an_approval_is_needed_when_asked_or_by_the_environment_or_the_root():
    assert approvals.needed(asked=True, environment=None, environment_requires=False,
                            root_approvals=())
    assert approvals.needed(asked=False, environment="prod", environment_requires=True,
                            root_approvals=())
    assert approvals.needed(asked=False, environment="prod", environment_requires=False,
                            root_approvals=("prod",))
    assert not approvals.needed(asked=False, environment="ui", environment_requires=False,
                                root_approvals=("prod",))
    assert not approvals.needed(asked=False, environment=None, environment_requires=False,
                                root_approvals=("prod",))


def test_the_opener_never_approves_even_as_an_admin_nor_as_the_named_approver():
    gate = _gate(approver="p_ada", approver_name="ada")
    sentence = "you opened flight f_1, so someone else must approve it (separation of duties)"
    assert refusal_to_clear(gate, person=ADMIN, flight_opener="p_admin") == sentence
    assert refusal_to_clear(gate, person=ADA, flight_opener="p_ada") == sentence


def test_an_admin_or_the_named_approver_approves_and_nobody_else():
    gate = _gate(approver="p_ada", approver_name="ada")
    assert refusal_to_clear(gate, person=ADMIN, flight_opener="p_bob") is None
    assert refusal_to_clear(gate, person=ADA, flight_opener="p_bob") is None
    assert refusal_to_clear(_gate(), person=BOB, flight_opener="p_ada") == \
        "only an admin may approve flight f_1"
    assert refusal_to_clear(gate, person=BOB, flight_opener="p_x") == \
        "only an admin or ada may approve flight f_1"
    # the opener clearer's rule (members clear gates on their own flights) does not reach it
    assert refusal_to_clear(_gate(), person=BOB, flight_opener="p_bob") is not None
    assert refusal_to_clear(gate, runner_id="r_1") == \
        "gate g_1 is cleared by a person, not a machine"


def test_rejecting_is_for_an_admin_or_the_approver_and_the_opener_cancels_instead():
    assert approvals.refusal_to_reject(ADMIN, flight_id="f_1", approver=None,
                                       approver_name=None) is None
    assert approvals.refusal_to_reject(ADA, flight_id="f_1", approver="p_ada",
                                       approver_name="ada") is None
    assert approvals.refusal_to_reject(BOB, flight_id="f_1", approver="p_ada",
                                       approver_name="ada") == (
        "only an admin or ada may reject flight f_1; its opener may cancel it: gg cancel f_1")
    assert approvals.rejected_reason("root", "not on a friday") == "rejected by root: not on a friday"
    assert approvals.rejected_reason("root", None) == "rejected by root"


def test_nobody_names_themselves_or_a_stranger_as_approver():
    assert approvals.refusal_to_name_approver(ADA, ADA, "ada") == (
        "--approver: you cannot approve a flight you open (separation of duties); "
        "name someone else")
    assert approvals.refusal_to_name_approver(ADA, None, "zed") == \
        "--approver: there is no person named zed"
    assert approvals.refusal_to_name_approver(ADA, replace(BOB, removed_at=5.0), "bob") == \
        "--approver: there is no person named bob"
    assert approvals.refusal_to_name_approver(ADA, BOB, "bob") is None


def test_a_flight_behind_its_approval_says_who_approves_it_and_how():
    flight = Flight(id="f_1", command=["true"], opened_by="p_bob", opened_at=1.0,
                    stage=Stage.GATED, gates=["g_1"])
    gate = _gate(approver="p_ada", approver_name="ada")
    ctx = Context(open_gates=[OpenGate(gate.id, gate.guards, gate.cleared_by_words, gate.kind)])
    waiting = why_waiting(flight, [], ctx)
    assert waiting.code == "approval"
    assert waiting.sentence == "waiting: needs approval by an admin or ada: gg approve f_1"
    assert waiting.remedy == ("an admin or ada approves it with gg approve f_1, or refuses it "
                              "with gg reject f_1 --reason WHY")
    assert _gate().cleared_by_words == "an admin"


def test_who_changed_a_flight_s_spec_may_not_approve_the_change_nor_may_its_opener():
    gate = _gate()
    gate.payload["changed_by"] = ADMIN.id
    assert refusal_to_clear(gate, person=ADMIN, flight_opener=ADA.id) == (
        "you changed flight f_1, so someone else must approve the change (separation of duties)")
    assert refusal_to_clear(gate, person=ADA, flight_opener=ADA.id) == approvals.opener_refusal("f_1")
    other_admin = Person(id="p_eve", name="eve", role="admin")
    assert refusal_to_clear(gate, person=other_admin, flight_opener=ADA.id) is None


def test_a_change_needs_an_approval_when_the_flight_had_one_or_its_environment_requires_one_now():
    assert approvals.change_needs_approval(ever_gated=True, environment=None,
                                           environment_requires=False, root_approvals=())
    assert approvals.change_needs_approval(ever_gated=False, environment="ui",
                                           environment_requires=True, root_approvals=())
    assert approvals.change_needs_approval(ever_gated=False, environment="prod",
                                           environment_requires=False, root_approvals=("prod",))
    assert not approvals.change_needs_approval(ever_gated=False, environment="ui",
                                               environment_requires=False,
                                               root_approvals=("prod",))


def test_an_approval_for_another_digest_than_the_gate_stands_for_is_refused():
    old, new = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert approvals.digest_refusal("f_1", wanted=new, given=None) is None
    assert approvals.digest_refusal("f_1", wanted=new, given=new) is None
    assert approvals.digest_refusal("f_1", wanted=new, given=old) == (
        "flight f_1 changed since you looked: approving it now runs sha256:bbbbbbbbbbbb, "
        "not sha256:aaaaaaaaaaaa; look again with gg show f_1")


def test_nobody_may_approve_when_every_admin_opened_or_changed_it():
    from gg.domain.approvals import nobody_may_approve

    assert nobody_may_approve(admins={"p_a"}, opener="p_a", changed_by=None, named_approver=None)
    assert nobody_may_approve(admins={"p_a", "p_b"}, opener="p_a", changed_by="p_b",
                              named_approver=None)
    assert not nobody_may_approve(admins={"p_a", "p_b"}, opener="p_a", changed_by=None,
                                  named_approver=None)
    assert not nobody_may_approve(admins={"p_a"}, opener="p_a", changed_by=None,
                                  named_approver="p_c")
