"""The small pool rules around the planner: member states from facts, attention, strategy changes."""

from __future__ import annotations

import pytest

from gg.airspace import strategy_from_mapping
from gg.domain.pools import (
    attention,
    code_refusal,
    member_takes,
    reconciled_state,
    shown_state,
    stale_event_due,
    strategy_changes,
)

D = "sha256:" + "a" * 64


def strategy(**over):
    data = {"environment": "ui", "inventory": {"name": "ui-pool", "size": 4, "warm": 1},
            "image": {"ref": "ui", "digest": D}, "bounds": {"pool-max": 3}}
    for key, value in over.items():
        section, _, field = key.partition("__")
        if field:
            data.setdefault(section, {})[field.replace("_", "-")] = value
        else:
            data[section] = value
    return strategy_from_mapping("ui", data)


@pytest.mark.parametrize("facts, expected", [
    # a gone process: dirty after a flight, stopped otherwise, untouched while it holds a lease
    ({"state": "ready", "running": False, "flew": True}, "dirty"),
    ({"state": "ready", "running": False, "flew": False}, "stopped"),
    ({"state": "ready", "running": False, "flew": True, "leased": True}, "ready"),
    ({"state": "starting", "running": False}, "stopped"),
    # a running process: settling members become ready once their runner is online
    ({"state": "starting", "running": True, "online": True, "joined": True}, "ready"),
    ({"state": "resetting", "running": True, "online": True, "joined": True}, "ready"),
    ({"state": "starting", "running": True, "online": False, "joined": True}, "starting"),
    ({"state": "starting", "running": True, "joined": False}, "starting"),
    ({"state": "starting", "running": True, "joined": False, "code_expired": True}, "stopped"),
    ({"state": "ready", "running": True, "online": False, "joined": True}, "ready"),
])
def test_an_attestation_turns_process_facts_into_member_states(facts, expected):
    base = {"running": True, "online": False, "leased": False, "flew": False, "joined": False,
            "code_expired": False}
    given = {k: v for k, v in facts.items() if k != "state"}
    assert reconciled_state(facts["state"], **{**base, **given}) == expected


def test_shown_state_puts_the_control_planes_facts_first():
    assert shown_state("ready", leased=True, flight_ended=False) == "busy"
    assert shown_state("ready", leased=False, flight_ended=True) == "dirty"
    assert shown_state("starting", leased=False, flight_ended=True) == "starting"
    assert shown_state("ready", leased=False, flight_ended=False) == "ready"


def test_a_spent_or_expired_code_is_refused():
    assert code_refusal(None, 0.0)
    assert code_refusal(100.0, 100.0)
    assert not code_refusal(100.0, 99.9)


def test_only_flights_requiring_exactly_the_pools_environment_are_a_members():
    assert member_takes({"environment": "ui"}, None, "ui")
    assert not member_takes({"environment": "ui"}, "r_1", "ui")
    assert not member_takes({"environment": "ui", "gpu": "a100"}, None, "ui")
    assert not member_takes({}, None, "ui")


def test_a_pool_needs_attention_when_never_attested_or_stale():
    assert attention(None, 0.0, 10.0, 900.0).startswith("never attested")
    assert attention(100.0, 0.0, 1000.0, 900.0) is None
    assert attention(100.0, 0.0, 1001.0, 900.0) == "last attested 15m ago (stale after 15m)"


def test_the_stale_event_is_due_once_per_episode():
    assert not stale_event_due(None, None, None, 10_000.0, 900.0)  # nothing in force
    assert not stale_event_due(1000.0, 0.0, None, 1900.0, 900.0)
    assert stale_event_due(1000.0, 0.0, None, 1901.0, 900.0)
    assert not stale_event_due(1000.0, 0.0, 1901.0, 5000.0, 900.0)  # noted this episode
    assert stale_event_due(3000.0, 0.0, 1901.0, 3901.0, 900.0)  # attested again, stale again
    assert stale_event_due(None, 0.0, None, 901.0, 900.0)  # never attested since in force


def test_more_machines_wait_for_a_gate_and_fewer_apply_at_once():
    old = strategy()
    assert [c.gated for c in strategy_changes(None, old)] == [True]
    fewer = strategy_changes(old, strategy(inventory={"name": "ui-pool", "size": 3, "warm": 0},
                                           bounds={"pool-max": 2}))
    assert [(c.text, c.gated) for c in fewer] == [
        ("lowers size 4 → 3", False), ("lowers warm 1 → 0", False),
        ("lowers pool-max 3 → 2", False)]
    more = strategy_changes(old, strategy(bounds={"pool-max": 4,
                                                  "active-hours": "08:00-20:00 UTC"}))
    assert [(c.text, c.gated) for c in more] == [
        ("raises pool-max 3 → 4", True),
        ("changes active-hours always → 08:00-20:00 UTC", True)]
    image = strategy_changes(old, strategy(image={"ref": "ui", "digest": "sha256:" + "b" * 64}))
    assert [c.gated for c in image] == [True]
    assert strategy_changes(old, strategy()) == []


def test_a_scale_section_added_or_raised_waits_for_a_gate_and_lowered_or_tuned_applies_at_once():
    plain = strategy(inventory={"name": "ui-pool", "size": 4})
    scaled = strategy(inventory={"name": "ui-pool", "size": 4},
                      scale={"min": 0, "max": 3, "idle-after": 60})
    assert [(c.text, c.gated) for c in strategy_changes(plain, scaled)] == [
        ("changes scale - → min 0 max 3", True)]
    raised = strategy(inventory={"name": "ui-pool", "size": 4},
                      scale={"min": 1, "max": 3, "idle-after": 60})
    assert [(c.text, c.gated) for c in strategy_changes(scaled, raised)] == [
        ("raises scale min 0 → 1", True)]
    tuned = strategy(inventory={"name": "ui-pool", "size": 4},
                     scale={"min": 0, "max": 2, "idle-after": 30, "cool-down": 10})
    assert [(c.text, c.gated) for c in strategy_changes(scaled, tuned)] == [
        ("lowers scale max 3 → 2", False), ("changes scale idle-after 60.0 → 30.0", False),
        ("changes scale cool-down - → 10.0", False)]
