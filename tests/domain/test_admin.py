"""The admin state machine: cordon, drain, resume, and drained by itself."""

from __future__ import annotations

import pytest

from gg.domain.admin import after_action, describe_change
from gg.domain.runners import Runner, after_lease_ended


@pytest.mark.parametrize("current", ["active", "cordoned", "draining", "drained"])
def test_cordon_from_any_live_state_is_cordoned(current):
    assert after_action(current, "cordon", live_leases=2) == "cordoned"


@pytest.mark.parametrize("current", ["active", "cordoned", "draining", "drained"])
def test_resume_from_any_live_state_is_active(current):
    assert after_action(current, "resume", live_leases=1) == "active"


def test_drain_with_work_in_flight_is_draining_and_without_is_drained_at_once():
    assert after_action("active", "drain", live_leases=1) == "draining"
    assert after_action("cordoned", "drain", live_leases=3) == "draining"
    assert after_action("active", "drain", live_leases=0) == "drained"


def test_draining_again_changes_nothing_and_drained_stays_drained():
    assert after_action("draining", "drain", live_leases=1) == "draining"
    assert after_action("drained", "drain", live_leases=0) == "drained"


def test_draining_becomes_drained_when_its_last_lease_ends():
    runner = Runner(id="r_1", name="a", admin_state="draining")
    assert after_lease_ended(runner, 1) == "draining"
    assert after_lease_ended(runner, 0) == "drained"


def test_a_retired_runner_cannot_be_changed_and_unknown_actions_are_refused():
    with pytest.raises(ValueError, match="retired"):
        after_action("retired", "resume", live_leases=0)
    with pytest.raises(ValueError, match="cordon, drain, resume"):
        after_action("active", "explode", live_leases=0)


def test_the_line_an_operator_reads_names_the_change_or_says_nothing_changed():
    assert describe_change("a", "active", "cordoned") == "a: active -> cordoned"
    assert describe_change("a", "cordoned", "cordoned") == "a is already cordoned"
    assert "finishes its current work" in describe_change("a", "active", "draining")
