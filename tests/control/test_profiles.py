"""Applying fleet profiles on the control plane: narrowings at once, widenings behind one gate."""

from __future__ import annotations

import pytest

from gg.airspace.errors import AirspaceError
from gg.control import enrolment, gates, people, profiles
from gg.control.core import Core
from gg.control.people import bootstrap
from gg.control.wiring import wired
from gg.errors import Forbidden
from gg.settings import Settings
from gg.store import open_store

from fleet_support import UI
from support import Clock, proof


@pytest.fixture
def settings():
    return Settings()


def enrolled(core, owner, profile="ui", name="m1"):
    _, token = enrolment.mint_token(core, owner, profile=profile)
    runner, _ = enrolment.enrol(core, token, name=name, **proof(core, "enrol"), workers=1,
                                inventory={}, version=None)
    return runner


def with_(**changes):
    return {**UI, **changes}


def test_a_first_apply_opens_one_gate_and_labels_appear_only_after_it_clears(core, owner):
    answer = profiles.apply_profile(core, owner, "ui", UI)
    assert answer["first_apply"] and answer["version"] == 1
    assert answer["waiting"] == ["first apply of profile ui (opens a gate)"]
    gate_id = answer["gate"]["id"]
    gate = core.store.gate(gate_id)
    assert gate.kind == "profile" and gate.clearer == "admin" and gate.open
    machine = enrolled(core, owner)
    assert core.store.runner(machine.id).labels == {}
    assert core.store.profile_record("ui").in_force is None

    gates.clear_gate(core, gate_id, person=owner)
    after = core.store.runner(machine.id)
    assert after.labels == {"environment": "ui"}
    assert after.profile_in_force["repository_hosts"] == ["git.example.com"]
    assert after.policy == {"isolation": "sandbox", "egress": "all", "workers": 2}
    record = core.store.profile_record("ui")
    assert record.in_force_version == 1 and record.wholly_in_force
    kinds = [e["kind"] for e in core.store.events()]
    assert "info:gate:opened" in kinds and "info:gate:cleared" in kinds


def test_a_narrowing_applies_at_once_without_a_gate(core, owner):
    first = profiles.apply_profile(core, owner, "ui", UI)
    gates.clear_gate(core, first["gate"]["id"], person=owner)
    machine = enrolled(core, owner)
    answer = profiles.apply_profile(core, owner, "ui", with_(**{"repository-hosts": []}))
    assert answer["gate"] is None and answer["waiting"] == []
    assert answer["applied_now"] == ["removes repository host git.example.com (applies now)"]
    assert core.store.gates(status="open") == []
    assert core.store.runner(machine.id).profile_in_force["repository_hosts"] == []
    assert core.store.profile_record("ui").in_force_version == 2


def test_a_widening_never_takes_effect_before_its_gate_clears(core, owner):
    first = profiles.apply_profile(core, owner, "ui", UI)
    gates.clear_gate(core, first["gate"]["id"], person=owner)
    machine = enrolled(core, owner)
    widened = with_(**{"repository-hosts": ["git.other.com"], "environment": "web"})
    answer = profiles.apply_profile(core, owner, "ui", widened)
    assert answer["applied_now"] == ["removes repository host git.example.com (applies now)"]
    assert set(answer["waiting"]) == {"adds repository host git.other.com (opens a gate)",
                                      "changes environment ui → web (opens a gate)"}
    runner = core.store.runner(machine.id)
    assert runner.labels == {"environment": "ui"}  # still the old environment
    assert runner.profile_in_force["repository_hosts"] == []  # the narrowing, not the widening
    record = core.store.profile_record("ui")
    assert (record.version, record.in_force_version, record.narrowed_by) == (2, 1, 2)

    gates.clear_gate(core, answer["gate"]["id"], person=owner)
    runner = core.store.runner(machine.id)
    assert runner.labels == {"environment": "web"}
    assert runner.profile_in_force["repository_hosts"] == ["git.other.com"]


def test_a_new_apply_supersedes_the_open_gate_and_the_old_one_cannot_be_cleared(core, owner):
    first = profiles.apply_profile(core, owner, "ui", UI)
    second = profiles.apply_profile(core, owner, "ui", with_(purpose="builds it all"))
    assert second["gate"]["id"] != first["gate"]["id"]
    assert core.store.gate(first["gate"]["id"]).status == "superseded"
    with pytest.raises(Forbidden):
        gates.clear_gate(core, first["gate"]["id"], person=owner)
    assert len(core.store.gates(status="open", subject="profile:ui")) == 1


def test_applying_the_same_profile_again_changes_nothing(core, owner):
    first = profiles.apply_profile(core, owner, "ui", UI)
    again = profiles.apply_profile(core, owner, "ui", UI)
    assert again["unchanged"] and again["version"] == 1
    assert again["gate"]["id"] == first["gate"]["id"]


def test_an_apply_back_to_what_is_in_force_drops_the_pending_gate(core, owner):
    first = profiles.apply_profile(core, owner, "ui", UI)
    gates.clear_gate(core, first["gate"]["id"], person=owner)
    widened = profiles.apply_profile(core, owner, "ui", with_(sweeps=True))
    back = profiles.apply_profile(core, owner, "ui", UI)
    assert back["gate"] is None and back["version"] == 3
    assert core.store.gate(widened["gate"]["id"]).status == "superseded"
    assert core.store.profile_record("ui").wholly_in_force


def test_isolation_none_is_refused_unless_the_server_runs_dev(core, owner, tmp_path):
    with pytest.raises(AirspaceError) as refused:
        profiles.apply_profile(core, owner, "ui", with_(policy={"isolation": "none"}))
    assert str(refused.value).startswith("<request>: policy.isolation: none is allowed only")
    assert core.store.profile_record("ui") is None
    dev = Core(store=open_store(tmp_path / "dev"), settings=Settings(dev=True), clock=Clock(), wiring=wired())
    bootstrap(dev, tmp_path / "dev")
    answer = profiles.apply_profile(dev, dev.store.person_by_name("owner"), "ui",
                                    with_(policy={"isolation": "none"}))
    assert answer["version"] == 1


def test_an_unknown_key_posted_is_refused_with_its_key_and_nothing_applies(core, owner):
    with pytest.raises(AirspaceError) as refused:
        profiles.apply_profile(core, owner, "ui", with_(colour="blue"))
    assert "colour: is not a known key" in str(refused.value)
    assert core.store.profile_records() == []


def test_only_an_admin_applies_a_profile(core, owner):
    member, _ = people.add_person(core, owner, "bob", admin=False)
    with pytest.raises(Forbidden):
        profiles.apply_profile(core, member, "ui", UI)


def test_profiles_listing_shows_applied_in_force_pending_and_enrolled(core, owner):
    first = profiles.apply_profile(core, owner, "ui", UI)
    machine = enrolled(core, owner)
    [row] = profiles.list_profiles(core)
    assert row["applied_version"] == 1 and row["in_force"] is None
    assert [g["id"] for g in row["pending_gates"]] == [first["gate"]["id"]]
    assert [r["name"] for r in row["enrolled"]] == [machine.name]
    gates.clear_gate(core, first["gate"]["id"], person=owner)
    [row] = profiles.list_profiles(core)
    assert row["in_force_version"] == 1 and row["pending_gates"] == []
    assert row["in_force"]["environment"] == "ui"
