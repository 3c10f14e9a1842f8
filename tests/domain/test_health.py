"""The health rule: the one missing piece, every check listed, and the checks verdict."""

from __future__ import annotations

import pytest

from gg.domain.health import (
    ALLOWLIST_NEEDS,
    BWRAP_UNUSABLE,
    CAPABILITIES_KEPT,
    CONFINEMENT_UNREPORTED,
    NO_BWRAP,
    NO_ENGINE,
    NO_NETNS,
    NO_NEW_PRIVS_UNSET,
    NO_PID_NAMESPACE,
    NO_REPORT,
    NONE_NEEDS_DEV,
    Check,
    checks,
    checks_verdict,
    effective_workers,
    first_missing,
    judge_health,
)
from gg.domain.policy import DEFAULT_POLICY, DEV_DEFAULT_POLICY, Policy, default_policy, is_looser

CONFINED = {"layout": "allowlist", "capabilities": "dropped", "no_new_privs": True,
            "user_namespace": True, "pid_namespace": True}
FULL = {"bwrap": "/usr/bin/bwrap", "bwrap_usable": True, "netns": True, "confinement": CONFINED,
        "container_engine": "podman", "isolation_levels": ["none", "sandbox", "container"],
        "egress_controls": ["all", "none", "allowlist"], "egress_allowlist_error": None}
NO_ALLOWLIST = {**FULL, "egress_controls": ["all", "none"],
                "egress_allowlist_error": "nftables (nft) and root"}
NO_BWRAP_CAPS = {**FULL, "bwrap": None, "bwrap_usable": False, "netns": False,
                 "confinement": None}
BWRAP_BROKEN = {**FULL, "bwrap_usable": False, "netns": False, "confinement": None}
CAPS_KEPT = {**FULL, "confinement": {**CONFINED, "capabilities": "kept",
                                     "user_namespace": False}}
NNP_UNSET = {**FULL, "confinement": {**CONFINED, "no_new_privs": False}}
NO_PIDNS = {**FULL, "confinement": {**CONFINED, "pid_namespace": False}}
NO_NETNS_CAPS = {**FULL, "netns": False}
NO_ENGINE_CAPS = {**FULL, "container_engine": None}


# -- policy -----------------------------------------------------------------------------------

def test_default_policy_is_sandbox_with_full_egress_and_one_worker():
    assert DEFAULT_POLICY.to_dict() == {"isolation": "sandbox", "egress": "all", "workers": 1}
    assert default_policy(dev=False, workers=4) == Policy("sandbox", "all", 4)


def test_dev_server_default_policy_is_isolation_none():
    assert DEV_DEFAULT_POLICY.isolation == "none"
    assert default_policy(dev=True).isolation == "none"


def test_policy_round_trips_through_a_dict():
    policy = Policy("container", "none", 3)
    assert Policy.from_dict(policy.to_dict()) == policy


def test_policy_keys_left_out_keep_the_default():
    assert Policy.from_dict({"egress": "none"}) == Policy("sandbox", "none", 1)
    assert Policy.from_dict(None) == DEFAULT_POLICY


@pytest.mark.parametrize("data, words", [
    ({"isolation": "vm"}, "isolation must be one of none, sandbox, container"),
    ({"egress": "some"}, "egress must be one of none, allowlist, all"),
    ({"workers": 0}, "workers must be between 1 and"),
    ({"workers": "2"}, "workers must be a whole number"),
    ({"workers": True}, "workers must be a whole number"),
    ({"colour": "red"}, r"a policy has only isolation, egress, workers, allow, limits \(cpus, .*\) and image, "
                        "not colour"),
])
def test_bad_policy_is_refused_with_a_sentence(data, words):
    with pytest.raises(ValueError, match=words):
        Policy.from_dict(data)


def test_policy_that_is_not_a_mapping_is_refused():
    with pytest.raises(ValueError, match="must be a mapping"):
        Policy.from_dict(["sandbox"])  # type: ignore[arg-type]


@pytest.mark.parametrize("old, new, looser", [
    (Policy("sandbox", "all", 1), Policy("none", "all", 1), True),
    (Policy("sandbox", "none", 1), Policy("sandbox", "allowlist", 1), True),
    (Policy("sandbox", "all", 1), Policy("sandbox", "all", 2), True),
    (Policy("none", "all", 2), Policy("container", "none", 1), False),
    (Policy("sandbox", "all", 1), Policy("sandbox", "all", 1), False),
    (Policy("gvisor", "all", 1), Policy("container", "all", 1), True),
    (Policy("gvisor", "all", 1), Policy("sandbox", "all", 1), True),
    (Policy("container", "all", 1), Policy("gvisor", "all", 1), False),
    (Policy("sandbox", "all", 1), Policy("gvisor", "none", 1), False),
])
def test_loosening_is_told_apart_from_tightening(old, new, looser):
    assert is_looser(old, new) is looser


# -- the one missing piece --------------------------------------------------------------------

@pytest.mark.parametrize("policy, caps, dev, missing", [
    (Policy("sandbox", "all"), FULL, False, None),
    (Policy("sandbox", "all"), NO_BWRAP_CAPS, False, NO_BWRAP),
    (Policy("sandbox", "all"), BWRAP_BROKEN, False, BWRAP_UNUSABLE),
    (Policy("sandbox", "none"), NO_NETNS_CAPS, False, NO_NETNS),
    (Policy("sandbox", "none"), NO_BWRAP_CAPS, False, NO_BWRAP),
    (Policy("sandbox", "all"), NO_NETNS_CAPS, False, None),
    (Policy("none", "all"), {}, False, NONE_NEEDS_DEV),
    (Policy("none", "all"), {}, True, None),
    (Policy("none", "none"), NO_BWRAP_CAPS, True, NO_BWRAP),
    (Policy("none", "none"), NO_NETNS_CAPS, True, NO_NETNS),
    (Policy("none", "none"), BWRAP_BROKEN, True, NO_NETNS),
    (Policy("container", "all"), NO_ENGINE_CAPS, False, NO_ENGINE),
    (Policy("container", "none"), FULL, False, None),
    (Policy("container", "none"), {**NO_BWRAP_CAPS}, False, None),
    (Policy("sandbox", "all"), {}, False, NO_REPORT),
    (Policy("sandbox", "all"), None, False, NO_REPORT),
    (Policy("sandbox", "all"), CAPS_KEPT, False, CAPABILITIES_KEPT),
    (Policy("sandbox", "none"), {**CAPS_KEPT, "netns": False}, False, CAPABILITIES_KEPT),
    (Policy("sandbox", "all"), NNP_UNSET, False, NO_NEW_PRIVS_UNSET),
    (Policy("sandbox", "all"), NO_PIDNS, False, NO_PID_NAMESPACE),
    (Policy("none", "none"), CAPS_KEPT, True, None),  # no sandbox: confinement is not asked
    (Policy("container", "all"), CAPS_KEPT, False, None),
])
def test_each_missing_piece_is_named(policy, caps, dev, missing):
    health = judge_health(policy, caps, dev=dev, started_workers=1)
    assert health.missing == missing
    assert health.ok is (missing is None)
    assert health.text == ("ok" if missing is None else f"degraded: {missing}")


@pytest.mark.parametrize("isolation", ["none", "sandbox", "container"])
def test_allowlist_is_met_where_the_runner_can_make_its_namespace_and_names_what_is_missing(
        isolation):
    assert judge_health(Policy(isolation, "allowlist"), FULL, dev=True, started_workers=1).ok
    health = judge_health(Policy(isolation, "allowlist"), NO_ALLOWLIST, dev=True,
                          started_workers=1)
    assert health.text == "degraded: egress allowlist needs nftables (nft) and root"
    only_root = {**NO_ALLOWLIST, "egress_allowlist_error": "root"}
    assert judge_health(Policy(isolation, "allowlist"), only_root, dev=True,
                        started_workers=1).missing == "egress allowlist needs root"
    old_report = {k: v for k, v in NO_ALLOWLIST.items() if k != "egress_allowlist_error"}
    assert judge_health(Policy(isolation, "allowlist"), old_report, dev=True,
                        started_workers=1).missing == ALLOWLIST_NEEDS


def test_most_fundamental_piece_wins_when_several_are_missing():
    nothing = {"bwrap": None, "bwrap_usable": False, "netns": False, "container_engine": None}
    assert judge_health(Policy("none", "allowlist"), nothing, dev=False,
                        started_workers=1).missing == NONE_NEEDS_DEV
    assert judge_health(Policy("sandbox", "allowlist"), nothing, dev=False,
                        started_workers=1).missing == ALLOWLIST_NEEDS
    assert judge_health(Policy("sandbox", "none"), nothing, dev=False,
                        started_workers=1).missing == NO_BWRAP


def test_isolation_none_is_refused_without_dev():
    health = judge_health(Policy("none", "all"), FULL, dev=False, started_workers=1)
    assert health.text == "degraded: isolation none is allowed only on a --dev server"


def test_container_without_engine_is_degraded():
    health = judge_health(Policy("container", "all"), NO_ENGINE_CAPS, dev=False,
                          started_workers=1)
    assert health.text == "degraded: no container engine reachable"


def test_policy_may_be_given_as_the_stored_dict():
    health = judge_health({"isolation": "sandbox", "egress": "all", "workers": 1},
                          NO_BWRAP_CAPS, dev=False, started_workers=1)
    assert health.missing == NO_BWRAP


def test_runner_side_ignores_the_dev_rule_but_not_the_host():
    assert first_missing(Policy("none", "all"), {}) is None
    assert first_missing(Policy("sandbox", "allowlist"), NO_ALLOWLIST) == (
        "egress allowlist needs nftables (nft) and root")


# -- workers ----------------------------------------------------------------------------------

def test_raising_workers_past_the_started_count_is_a_note_not_degraded():
    health = judge_health(Policy("sandbox", "all", 8), FULL, dev=False, started_workers=2)
    assert health.ok
    assert health.notes == ("workers raised to 8 needs a restart (started with 2)",)
    assert effective_workers(Policy("sandbox", "all", 8), 2) == 2


def test_lowering_workers_applies_at_once_without_a_note():
    health = judge_health(Policy("sandbox", "all", 1), FULL, dev=False, started_workers=4)
    assert health.ok and health.notes == ()
    assert effective_workers(Policy("sandbox", "all", 1), 4) == 1


def test_the_workers_note_survives_a_degraded_runner():
    health = judge_health(Policy("sandbox", "all", 3), NO_BWRAP_CAPS, dev=False,
                          started_workers=1)
    assert health.missing == NO_BWRAP
    assert health.notes == ("workers raised to 3 needs a restart (started with 1)",)


# -- the checks list --------------------------------------------------------------------------

def test_every_check_is_listed_in_judging_order():
    listed = checks(Policy("sandbox", "none", 1), FULL, dev=False, started_workers=1)
    assert [c.name for c in listed] == [
        "isolation allowed", "capability report", "bubblewrap installed",
        "bubblewrap namespaces", "sandbox confinement", "network namespace", "workers"]
    assert all(c.passed for c in listed)
    assert listed[4].detail == ("capabilities dropped, no_new_privs, own pid namespace "
                                "in a user namespace")


def test_a_report_from_before_the_confinement_check_reads_degraded():
    """A runner older than the check ran sandboxes that kept their capabilities."""
    legacy = {k: v for k, v in FULL.items() if k != "confinement"}
    listed = checks(Policy("sandbox", "all", 1), legacy, dev=False, started_workers=1)
    assert ("sandbox confinement", False, CONFINEMENT_UNREPORTED) in [
        (c.name, c.passed, c.detail) for c in listed]
    assert judge_health(Policy("sandbox", "all", 1), legacy, dev=False,
                        started_workers=1).missing == CONFINEMENT_UNREPORTED


def test_a_failed_check_carries_the_missing_piece():
    listed = checks(Policy("sandbox", "none", 1), BWRAP_BROKEN, dev=False, started_workers=1)
    failed = [c for c in listed if not c.passed]
    assert [(c.name, c.detail) for c in failed] == [
        ("bubblewrap namespaces", BWRAP_UNUSABLE), ("network namespace", NO_NETNS)]


def test_container_policy_lists_the_engine_not_bubblewrap():
    names = [c.name for c in checks(Policy("container", "none"), FULL, dev=False,
                                    started_workers=1)]
    assert "container engine" in names and "bubblewrap installed" not in names


def test_dev_policy_none_all_needs_no_capability_report():
    names = [c.name for c in checks(Policy("none", "all"), {}, dev=True, started_workers=1)]
    assert names == ["isolation allowed", "workers"]


def test_an_allowlist_lists_its_check_after_the_report_whatever_the_isolation():
    for isolation, after in (("sandbox", "bubblewrap installed"), ("container", "container engine"),
                             ("none", "workers")):
        names = [c.name for c in checks(Policy(isolation, "allowlist"), FULL, dev=True,
                                        started_workers=1)]
        assert names[1:4] == ["capability report", "egress allowlist", after], names


# -- the verdict ------------------------------------------------------------------------------

PASSED = [Check("a", True, "fine"), Check("b", True, "fine")]
TWO_FAILED = [Check("a", False, NO_BWRAP), Check("b", False, NO_NETNS), Check("c", True, "x")]


@pytest.mark.parametrize("listed, reported_at, pending, verdict", [
    (PASSED, 95.0, False, "checks passed"),
    (TWO_FAILED, 95.0, False, "2 checks failed"),
    ([Check("a", False, NO_BWRAP)], 95.0, False, "1 check failed"),
    (PASSED, 10.0, False, "checks stale"),
    (TWO_FAILED, 10.0, True, "checks stale"),
    (PASSED, 95.0, True, "checks passed"),  # every check listed shows ✓: not "pending"
    (TWO_FAILED, 95.0, True, "checks pending"),
    ([], None, False, "checks never run"),
    (PASSED, None, True, "checks never run"),
])
def test_checks_verdict(listed, reported_at, pending, verdict):
    assert checks_verdict(listed, reported_at, 100.0, 45.0, policy_changed=pending) == verdict


def test_a_report_exactly_stale_after_old_is_not_yet_stale():
    assert checks_verdict(PASSED, 55.0, 100.0, 45.0) == "checks passed"


@pytest.mark.parametrize("gvisor, missing", [
    ({"path": "/usr/bin/runsc", "usable": True, "error": None}, None),
    ({"path": None, "usable": False, "error": "runsc is not installed"},
     "gvisor (runsc) is not usable: runsc is not installed"),
    ({"path": "/usr/bin/runsc", "usable": False, "error": "runsc exited with status 128"},
     "gvisor (runsc) is not usable: runsc exited with status 128"),
    (None, "gvisor (runsc) is not usable: not reported by this runner"),
])
def test_a_gvisor_policy_reads_degraded_naming_why_runsc_is_not_usable(gvisor, missing):
    caps = {**FULL, **({"gvisor": gvisor} if gvisor is not None else {})}
    for egress in ("all", "none"):  # runsc cuts egress itself: no network namespace check
        health = judge_health(Policy("gvisor", egress), {**caps, "netns": False}, dev=False,
                              started_workers=1)
        assert health.missing == missing
    names = [c.name for c in checks(Policy("gvisor", "none"), caps, dev=False,
                                    started_workers=1)]
    assert "gvisor" in names and "bubblewrap installed" not in names


@pytest.mark.parametrize("image", ["localhost/gg-ci:1", "python:3.12-slim",
                                   "registry.example.com:5000/ci/python@sha256:" + "a" * 64])
def test_a_policys_image_is_kept_and_any_change_of_it_is_looser(image):
    policy = Policy.from_dict({"isolation": "container", "image": image})
    assert policy.to_dict()["image"] == image
    assert is_looser(Policy(isolation="container"), policy)
    assert is_looser(policy, Policy(isolation="container"))
    assert not is_looser(policy, policy)
    assert "image" not in Policy().to_dict()  # a policy without one reads as it did before


@pytest.mark.parametrize("image", ["", "Upper/Case:1", "-rm", "a b", "x" * 300, 7])
def test_a_bad_image_is_refused_with_a_sentence(image):
    with pytest.raises(ValueError, match="image must be an image reference like"):
        Policy.from_dict({"image": image})
