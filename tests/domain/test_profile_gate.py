"""The gate rule (SPEC 9): a change that lets machines do more opens a gate; less applies now."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gg.domain.policy import Policy
from gg.domain.profile_gate import (
    Change,
    ProfileChange,
    effective_profile,
    judge_profile_change,
)
from gg.domain.profiles import Profile

BASE = Profile(
    name="ui",
    purpose="builds the web UI",
    roles=("runner",),
    environment="ui",
    agent="shell",
    repository_hosts=("git.example.com", "old.example.com"),
    destinations=("https://git.example.com/acme/ui.git",),
    trackers=("jira:UI",),
    credentials=("npm-token",),
    sweeps=False,
    ownership="organisation",
    policy=Policy(isolation="sandbox", egress="allowlist", workers=4),
)


def with_policy(**kw) -> Profile:
    return replace(BASE, policy=replace(BASE.policy, **kw))


def only(change: ProfileChange) -> Change:
    assert len(change.changes) == 1, change.changes
    return change.changes[0]


# -- first apply and no change -------------------------------------------------------------


def test_first_apply_opens_a_gate_and_nothing_is_in_force_yet():
    change = judge_profile_change(None, BASE)
    assert change.first_apply and change.needs_gate
    assert only(change) == Change("profile", "first apply of profile ui (opens a gate)", True)
    assert effective_profile(None, BASE, change) is None


def test_the_same_profile_again_changes_nothing():
    change = judge_profile_change(BASE, BASE)
    assert change.unchanged and not change.needs_gate and not change.first_apply
    assert effective_profile(BASE, BASE) == BASE


# -- every widening opens a gate -------------------------------------------------------------

WIDENINGS = [
    ("roles", replace(BASE, roles=("runner", "maintain")), "adds role maintain (opens a gate)"),
    ("repository-hosts", replace(BASE, repository_hosts=BASE.repository_hosts + ("new.example.com",)),
     "adds repository host new.example.com (opens a gate)"),
    ("destinations", replace(BASE, destinations=BASE.destinations + ("/srv/git/site.git",)),
     "adds destination /srv/git/site.git (opens a gate)"),
    ("trackers", replace(BASE, trackers=("jira:UI", "jira:OPS")), "adds tracker jira:OPS (opens a gate)"),
    ("credentials", replace(BASE, credentials=("npm-token", "git.example.com/acme/ui")),
     "adds credential git.example.com/acme/ui (opens a gate)"),
    ("sweeps", replace(BASE, sweeps=True), "turns sweeps on (opens a gate)"),
    ("environment", replace(BASE, environment="api"), "changes environment ui → api (opens a gate)"),
    ("agent", replace(BASE, agent="claude"), "changes agent shell → claude (opens a gate)"),
    ("policy.isolation", with_policy(isolation="none"), "loosens isolation sandbox → none (opens a gate)"),
    ("policy.egress", with_policy(egress="all"), "loosens egress allowlist → all (opens a gate)"),
    ("policy.workers", with_policy(workers=8), "raises workers 4 → 8 (opens a gate)"),
    ("policy.image", with_policy(image="registry.example.com/ci/python:3.12"),
     "changes image (the default) → registry.example.com/ci/python:3.12 (opens a gate)"),
]


@pytest.mark.parametrize("field,new,description", WIDENINGS, ids=[w[0] for w in WIDENINGS])
def test_each_widening_opens_a_gate_and_is_withheld(field, new, description):
    change = judge_profile_change(BASE, new)
    assert only(change) == Change(field, description, True)
    assert change.needs_gate
    assert effective_profile(BASE, new, change) == BASE


def test_loosening_isolation_from_container_to_sandbox_opens_a_gate():
    strong = with_policy(isolation="container")
    change = judge_profile_change(strong, BASE)
    assert only(change) == Change("policy.isolation",
                                  "loosens isolation container → sandbox (opens a gate)", True)


def test_changing_or_removing_the_image_opens_a_gate_and_keeps_the_one_in_force():
    pinned = with_policy(image="localhost/ci:1")
    for new in (with_policy(image="localhost/ci:2"), BASE):
        change = judge_profile_change(pinned, new)
        assert only(change).field == "policy.image" and change.needs_gate
        assert effective_profile(pinned, new, change).policy.image == "localhost/ci:1"
    assert Policy(image="localhost/ci:1") != Policy(image="localhost/ci:2")


def test_loosening_egress_from_none_opens_a_gate():
    closed = with_policy(egress="none")
    assert only(judge_profile_change(closed, BASE)).widening


# -- every narrowing applies at once ----------------------------------------------------------

NARROWINGS = [
    ("roles", replace(BASE, roles=()), "removes role runner (applies now)"),
    ("repository-hosts", replace(BASE, repository_hosts=("git.example.com",)),
     "removes repository host old.example.com (applies now)"),
    ("destinations", replace(BASE, destinations=()),
     "removes destination https://git.example.com/acme/ui.git (applies now)"),
    ("trackers", replace(BASE, trackers=()), "removes tracker jira:UI (applies now)"),
    ("credentials", replace(BASE, credentials=()), "removes credential npm-token (applies now)"),
    ("policy.isolation", with_policy(isolation="container"),
     "tightens isolation sandbox → container (applies now)"),
    ("policy.egress", with_policy(egress="none"), "tightens egress allowlist → none (applies now)"),
    ("policy.workers", with_policy(workers=2), "lowers workers 4 → 2 (applies now)"),
    ("purpose", replace(BASE, purpose="builds the UI and its docs"),
     'changes purpose to "builds the UI and its docs" (applies now)'),
    ("ownership", replace(BASE, ownership="open"),
     "changes the ownership of newly enrolled machines organisation → open (applies now)"),
]


@pytest.mark.parametrize("field,new,description", NARROWINGS, ids=[n[0] for n in NARROWINGS])
def test_each_narrowing_applies_at_once(field, new, description):
    change = judge_profile_change(BASE, new)
    assert only(change) == Change(field, description, False)
    assert not change.needs_gate
    assert effective_profile(BASE, new, change) == new


def test_turning_sweeps_off_applies_at_once():
    sweeping = replace(BASE, sweeps=True)
    change = judge_profile_change(sweeping, BASE)
    assert only(change) == Change("sweeps", "turns sweeps off (applies now)", False)
    assert effective_profile(sweeping, BASE) == BASE


# -- mixed edits split ------------------------------------------------------------------------


def test_adding_one_host_and_removing_another_applies_the_removal_and_withholds_the_addition():
    new = replace(BASE, repository_hosts=("git.example.com", "new.example.com"))
    change = judge_profile_change(BASE, new)
    assert [c.description for c in change.widenings] == [
        "adds repository host new.example.com (opens a gate)"]
    assert [c.description for c in change.narrowings] == [
        "removes repository host old.example.com (applies now)"]
    assert effective_profile(BASE, new, change).repository_hosts == ("git.example.com",)


def test_a_mixed_edit_applies_every_narrowing_and_withholds_every_widening():
    new = replace(
        BASE,
        purpose="new purpose",
        roles=("maintain",),
        environment="api",
        trackers=(),
        sweeps=True,
        policy=Policy(isolation="container", egress="all", workers=2),
    )
    change = judge_profile_change(BASE, new)
    assert {c.field for c in change.widenings} == {"roles", "environment", "sweeps", "policy.egress"}
    assert {c.field for c in change.narrowings} == {
        "purpose", "roles", "trackers", "policy.isolation", "policy.workers"}
    effective = effective_profile(BASE, new, change)
    assert effective == replace(
        BASE,
        purpose="new purpose",
        roles=(),  # runner removed now, maintain waits for the gate
        environment="ui",
        trackers=(),
        sweeps=False,
        policy=Policy(isolation="container", egress="allowlist", workers=2),
    )


def test_respelling_a_host_or_destination_is_no_change():
    new = replace(BASE, repository_hosts=("GIT.example.com", "old.example.com"),
                  destinations=("git@git.example.com:acme/ui.git",))
    change = judge_profile_change(BASE, new)
    assert change.unchanged
    assert effective_profile(BASE, new) == new


def test_the_change_serialises_for_the_wire():
    change = judge_profile_change(BASE, with_policy(workers=8))
    assert change.to_dict() == {
        "profile": "ui", "first_apply": False, "needs_gate": True,
        "changes": [{"field": "policy.workers", "widening": True,
                     "description": "raises workers 4 → 8 (opens a gate)"}],
    }


def test_effective_profile_refuses_a_change_judged_for_another_pair():
    other = judge_profile_change(BASE, replace(BASE, sweeps=True))
    with pytest.raises(ValueError):
        effective_profile(BASE, with_policy(workers=1), other)


def test_profiles_with_different_names_cannot_be_compared():
    with pytest.raises(ValueError):
        judge_profile_change(BASE, replace(BASE, name="api"))
