"""The action queue through its use cases: approve, reject, force, pending, and the
environments (and root envelope) that require an approval. A real SQLite store, no server."""

from __future__ import annotations

import pytest

from gg.control import approvals, environments, flights, gates, leases, pending, people
from gg.domain.events import EventKind
from gg.domain.flight_spec import FlightSpec
from gg.errors import BadRequest, Conflict, Forbidden
from gg.settings import Settings

from support import make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


@pytest.fixture
def settings():
    return Settings(dev=True)


@pytest.fixture
def eve(core, owner):
    people.add_person(core, owner, "eve", admin=True)
    return core.store.person_by_name("eve")


def _events(core, kind, flight_id):
    return [e for e in core.store.events(kind=kind.value, limit=1000) if e["flight_id"] == flight_id]


def test_a_flight_opened_with_approval_is_gated_and_never_offered(core, owner, ada):
    runner = make_runner(core, owner)
    f = flights.open_flight(core, ada, FlightSpec(command=["true"], approval=True))
    row = flights.show_flight(core, f.id)
    assert row["stage"] == "gated"
    assert row["waiting"] == f"waiting: needs approval by an admin: gg approve {f.id}"
    assert leases.try_claim(core, runner.id) is None


def test_the_named_approver_approves_and_the_flight_becomes_ready(core, owner, ada, bob):
    runner = make_runner(core, owner)
    f = flights.open_flight(core, ada, FlightSpec(command=["true"], approver="bob"))
    assert flights.show_flight(core, f.id)["waiting"] == (
        f"waiting: needs approval by an admin or bob: gg approve {f.id}")
    approvals.approve(core, bob, f.id)
    assert core.store.flight(f.id).stage == "ready"
    assert leases.try_claim(core, runner.id)[0].id == f.id
    approved = _events(core, EventKind.FLIGHT_APPROVED, f.id)
    assert [e["actor"] for e in approved] == ["bob"]


def test_the_opener_never_approves_whatever_their_role_by_any_path(core, owner, ada):
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], approval=True))
    gate = core.store.flight_gates(f.id)[0]
    sentence = f"you opened flight {f.id}, so someone else must approve it (separation of duties)"
    for attempt in (lambda: approvals.approve(core, owner, f.id),
                    lambda: gates.clear_gate(core, gate.id, person=owner),
                    lambda: approvals.force(core, owner, f.id)):
        with pytest.raises(Forbidden) as refused:
            attempt()
        assert str(refused.value) == sentence
    assert core.store.flight(f.id).stage == "gated"
    with pytest.raises(Forbidden):  # a member who is not the approver
        approvals.approve(core, ada, f.id)


def test_a_member_opener_cannot_approve_their_own_flight_though_they_clear_opener_gates(
        core, owner, ada):
    f = flights.open_flight(core, ada, FlightSpec(command=["true"], approval=True))
    with pytest.raises(Forbidden):
        approvals.approve(core, ada, f.id)


def test_reject_ends_the_flight_cancelled_with_the_reason_and_records_who(core, owner, ada, bob):
    f = flights.open_flight(core, ada, FlightSpec(command=["true"], approver="bob"))
    with pytest.raises(Forbidden):  # the opener, a member, cancels instead
        approvals.reject(core, ada, f.id, "no")
    approvals.reject(core, bob, f.id, "not on a friday")
    shown = flights.show_flight(core, f.id)
    assert (shown["stage"], shown["ended_reason"]) == ("cancelled", "rejected by bob: not on a friday")
    rejected = _events(core, EventKind.FLIGHT_REJECTED, f.id)
    assert [(e["actor"], e["body"]["reason"]) for e in rejected] == [("bob", "not on a friday")]
    assert core.store.flight_gates(f.id, status="rejected")
    with pytest.raises(Conflict):
        approvals.approve(core, owner, f.id)
    assert pending.pending(core, owner) == []


def test_force_clears_every_gate_a_person_may_clear_and_records_who(core, owner, eve, ada):
    f = flights.open_flight(core, ada, FlightSpec(command=["true"], approval=True))
    with core.store.atomic():
        other = gates.open_gate(core, kind="environment", subject="x", guards="something",
                                why="test", clearer="opener", actor="owner")
        gates.hold_flights(core, other.id, [f.id])
    with pytest.raises(Forbidden):
        approvals.force(core, ada, f.id)  # admins only
    _, cleared = approvals.force(core, eve, f.id)
    assert len(cleared) == 2 and core.store.flight(f.id).stage == "ready"
    forced = _events(core, EventKind.FLIGHT_FORCED, f.id)
    assert [(e["actor"], sorted(e["body"]["gates"])) for e in forced] == [("eve", sorted(cleared))]
    with pytest.raises(Conflict):
        approvals.force(core, eve, f.id)  # nothing left to force


def test_pending_lists_what_waits_for_a_person_and_whether_you_may_clear_it(core, owner, ada, bob):
    mine = flights.open_flight(core, ada, FlightSpec(command=["true"], approver="bob"))
    flights.open_flight(core, ada, FlightSpec(command=["true"]))  # ready: waits for no person
    rows = pending.pending(core, bob)
    assert [r["id"] for r in rows] == [mine.id]
    assert rows[0]["waiting"] == f"waiting: needs approval by an admin or bob: gg approve {mine.id}"
    assert [g["you_may_clear"] for g in rows[0]["pending"]] == [True]
    assert [g["you_may_clear"] for g in pending.pending(core, ada)[0]["pending"]] == [False]
    flights.cancel(core, ada, mine.id)
    assert pending.pending(core, owner) == []
    assert core.store.flight_gates(mine.id) == []  # the approval stops being open


def test_an_environment_or_the_root_envelope_can_require_an_approval(core, owner, ada):
    make_runner(core, owner, labels={"environment": "prod"})
    for name in ("prod", "ui"):
        gate = environments.chart(core, owner, name, "true")["gate"]
        gates.clear_gate(core, gate, person=owner)
    assert flights.open_flight(core, ada, FlightSpec(command=["true"], environment="prod")).stage == "ready"
    with pytest.raises(Forbidden):
        approvals.set_environment_approval(core, ada, "prod", True)
    assert approvals.set_environment_approval(core, owner, "prod", True) is True
    f = flights.open_flight(core, ada, FlightSpec(command=["true"], environment="prod"))
    assert f.stage == "gated"
    assert environments.environment_view(core, "prod")["approval"] == "required"
    assert approvals.set_environment_approval(core, owner, "prod", False) is True
    assert flights.open_flight(core, ada, FlightSpec(command=["true"], environment="prod")).stage == "ready"

    make_runner(core, owner, name="r2", labels={"environment": "ui"})
    environments.apply_root(core, owner, {"environments": ["prod", "ui"], "approvals": ["ui"]})
    assert environments.root_view(core)["approvals"] == ["ui"]
    assert flights.open_flight(core, ada, FlightSpec(command=["true"], environment="ui")).stage == "gated"
    assert flights.open_flight(core, ada, FlightSpec(command=["true"], environment="prod")).stage == "ready"


def test_a_bad_approver_is_refused_and_nothing_is_opened(core, owner, ada):
    before = len(core.store.flight_values(limit=100))
    for name, sentence in (("zed", "--approver: there is no person named zed"),
                           ("ada", "--approver: you cannot approve a flight you open "
                                   "(separation of duties); name someone else")):
        with pytest.raises(BadRequest) as refused:
            flights.open_flight(core, ada, FlightSpec(command=["true"], approver=name))
        assert str(refused.value) == sentence
    assert len(core.store.flight_values(limit=100)) == before
    assert core.store.gates(kind="approval") == []


def test_the_only_admins_own_flight_says_a_second_admin_is_needed_and_how(core, owner, eve):
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], approval=True))
    # eve, a second admin, may approve it: the usual sentence
    assert flights.show_flight(core, f.id)["waiting"] == (
        f"waiting: needs approval by an admin: gg approve {f.id}")
    people.remove_person(core, owner, "eve")
    row = flights.show_flight(core, f.id)
    assert row["waiting"] == ("waiting: needs approval by an admin, and nobody may give it: "
                              "every admin opened or changed it")
    assert row["remedy"] == ("an admin adds a second admin (gg person add NAME --admin), who "
                             f"approves it with gg approve {f.id}; or cancel it: gg cancel {f.id}")
    listed = {r["id"]: r for r in flights.list_flights(core)["items"]}
    assert listed[f.id]["waiting"] == row["waiting"]
    with pytest.raises(Forbidden):  # what it says is true: the owner may not approve it
        approvals.approve(core, owner, f.id)
