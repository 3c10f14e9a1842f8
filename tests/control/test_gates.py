"""Gates hold flights back until someone allowed says yes."""

from __future__ import annotations

import pytest

from gg.control import flights, gates, leases, people
from gg.domain.flight_spec import FlightSpec
from gg.domain.gates import Gate, refusal_to_clear
from gg.domain.people import Person
from gg.errors import Forbidden
from gg.settings import Settings

from support import make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


@pytest.fixture
def settings():
    return Settings(dev=True)


def gate_on(core, flight_ids, clearer="admin", subject="environment:ui", **kw):
    with core.store.atomic():
        gate = gates.open_gate(core, kind="environment", subject=subject,
                               guards="charting environment ui", why="a new meaning",
                               clearer=clearer, actor="owner", **kw)
        gates.hold_flights(core, gate.id, flight_ids)
    return gate


def test_a_flight_behind_an_open_gate_is_gated_and_says_so(core, owner):
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    gate = gate_on(core, [f.id])
    row = flights.show_flight(core, f.id)
    assert row["stage"] == "gated"
    assert row["waiting"] == f"waiting: gate {gate.id} is open (charting environment ui)"
    assert row["remedy"] == f"an admin can clear it: gg gate clear {gate.id}"


def test_a_gated_flight_is_never_offered_and_becomes_ready_when_the_gate_clears(core, owner):
    runner = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    gate = gate_on(core, [f.id])
    assert leases.try_claim(core, runner.id) is None
    gates.clear_gate(core, gate.id, person=owner)
    assert core.store.flight(f.id).stage == "ready"
    assert leases.try_claim(core, runner.id)[0].id == f.id
    kinds = [e["kind"] for e in core.store.events(kind="info:gate")]
    assert kinds == ["info:gate:opened", "info:gate:cleared"]
    assert core.store.gate(gate.id).cleared_by == "owner"


def test_a_member_cannot_clear_an_admin_gate_and_nothing_changes(core, owner):
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    gate = gate_on(core, [f.id])
    member, _ = people.add_person(core, owner, "bob", admin=False)
    member = core.store.person_by_name("bob")
    with pytest.raises(Forbidden) as err:
        gates.clear_gate(core, gate.id, person=member)
    assert err.value.message == f"only an admin may clear gate {gate.id}"
    assert core.store.gate(gate.id).status == "open"
    assert core.store.flight(f.id).stage == "gated"


def test_a_flight_with_two_open_gates_waits_for_both(core, owner):
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    first = gate_on(core, [f.id], subject="a")
    second = gate_on(core, [f.id], subject="b")
    gates.clear_gate(core, first.id, person=owner)
    assert core.store.flight(f.id).stage == "gated"
    gates.clear_gate(core, second.id, person=owner)
    assert core.store.flight(f.id).stage == "ready"


def test_a_newer_gate_on_the_same_subject_supersedes_and_keeps_holding_its_flights(core, owner):
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    old = gate_on(core, [f.id])
    with core.store.atomic():
        new = gates.open_gate(core, kind="environment", subject="environment:ui", guards="again",
                              why="re-charted", clearer="admin", actor="owner")
    assert core.store.gate(old.id).status == "superseded"
    assert core.store.flight(f.id).gates == [old.id, new.id]
    gates.clear_gate(core, new.id, person=owner)
    assert core.store.flight(f.id).stage == "ready"


def test_who_may_clear_which_gate():
    def gate(clearer, runner_id=None):
        return Gate(id="g_1", kind="maintenance", subject="s", guards="g", why="w",
                    clearer=clearer, opened_at=0.0, runner_id=runner_id)
    admin = Person(id="p_a", name="p_a", role="admin")
    member = Person(id="p_m", name="p_m", role="member")
    assert refusal_to_clear(gate("admin"), person=admin) is None
    assert refusal_to_clear(gate("admin"), person=member) == "only an admin may clear gate g_1"
    assert refusal_to_clear(gate("opener"), person=member, flight_opener="p_m") is None
    assert refusal_to_clear(gate("opener"), person=member, flight_opener="p_x") is not None
    machine = gate("machine", runner_id="r_1")
    assert "only be cleared by the machine itself" in refusal_to_clear(machine, person=admin)
    assert refusal_to_clear(machine, runner_id="r_1") is None
    assert refusal_to_clear(machine, runner_id="r_2") == "gate g_1 belongs to another machine"
    cleared = gate("admin")
    cleared.status = "cleared"
    assert refusal_to_clear(cleared, person=admin) == "gate g_1 is cleared already"
