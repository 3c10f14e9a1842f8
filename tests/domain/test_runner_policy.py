"""The one rule for a runner's assigned policy: default, then profile, then the admin."""

from __future__ import annotations

import pytest

from gg.domain.policy import Policy
from gg.domain.runner_policy import assigned_policy


def test_the_default_is_sandbox_and_none_only_on_a_dev_server_with_the_started_workers():
    assert assigned_policy(dev=False, started_workers=3) == Policy("sandbox", "all", 3)
    assert assigned_policy(dev=True, started_workers=1) == Policy("none", "all", 1)


def test_a_profile_overrides_the_default_and_the_admin_overrides_the_profile_key_by_key():
    profile = {"isolation": "container", "egress": "none"}
    got = assigned_policy(dev=False, started_workers=2, profile=profile,
                          override={"egress": "all"})
    assert got == Policy("container", "all", 2)


def test_an_admin_workers_setting_is_kept_even_when_the_start_count_changes():
    assert assigned_policy(dev=False, started_workers=8, override={"workers": 2}).workers == 2


def test_a_bad_value_in_any_layer_is_one_sentence():
    with pytest.raises(ValueError, match="isolation must be one of"):
        assigned_policy(dev=False, started_workers=1, override={"isolation": "vm"})
    with pytest.raises(ValueError, match="only isolation, egress, workers, allow, limits"):
        assigned_policy(dev=False, started_workers=1, profile={"cpu": 2})
