"""Resource limits as pure rules: reading them, settling them with a runner's policy, the
degraded health a missing controller gives, the OOM reason and the usage note."""

from __future__ import annotations

import pytest

from gg.domain import limits
from gg.domain.health import judge_health
from gg.domain.policy import Policy, is_looser

HOST = {"flight_limits": {"memory": "v1", "cpu": "v1", "cpuacct": "v2", "pids": "v1"}}


@pytest.mark.parametrize("text, size", [("512M", 512 << 20), ("2G", 2 << 30), ("1.5g", 3 << 29),
                                        ("1536k", 1536 << 10), (1 << 20, 1 << 20)])
def test_memory_is_read_in_units_of_1024(text, size):
    assert limits.parse_memory(text) == size


@pytest.mark.parametrize("parse, text, said", [
    (limits.parse_memory, "12Q", "memory must be a size like 512M or 2G, not '12Q'"),
    (limits.parse_memory, "12", "memory must be between 1M and 1024T, not 12B"),
    (limits.parse_cpus, "0", "cpus must be between 0.01 and 1024, not 0"),
    (limits.parse_cpus, "nan", "cpus must be between 0.01 and 1024, not nan"),
    (limits.parse_cpus, "half", "cpus must be a number of cores like 0.5 or 2, not 'half'"),
    (limits.parse_pids, "-1", "pids must be between 1 and 4194304, not -1"),
    (limits.parse_pids, "1.5", "pids must be a whole number of processes, not '1.5'"),
])
def test_a_bad_limit_is_refused_with_one_sentence(parse, text, said):
    with pytest.raises(ValueError) as refused:
        parse(text)
    assert str(refused.value) == said


def test_what_a_flight_asks_wins_over_the_policys_default_and_the_rest_are_the_defaults():
    policy = {"cpus": 2, "memory": "512M", "max_memory": "1G", "max_pids": 100}
    settled = limits.settle(limits.Limits(cpus=0.5), Policy.from_dict(policy).to_dict())
    assert settled == limits.Limits(cpus=0.5, memory=512 << 20, pids=None)


def test_asking_more_than_the_policys_maximum_is_refused_not_cut_down():
    with pytest.raises(ValueError) as refused:
        limits.settle(limits.Limits(pids=500), {"max_pids": 100})
    assert str(refused.value) == "--pids 500 is more than the runner's policy allows (at most 100)"


def test_a_policy_whose_default_is_over_its_maximum_is_refused():
    with pytest.raises(ValueError) as refused:
        Policy.from_dict({"memory": "2G", "max_memory": "1G"})
    assert str(refused.value) == ("the policy's default memory 2G is more than its maximum "
                                  "allows (at most 1G)")


def test_a_policy_without_limits_reads_as_before_limits_existed():
    assert Policy().to_dict() == {"isolation": "sandbox", "egress": "all", "workers": 1}


def test_raising_or_removing_a_maximum_is_looser_and_lowering_it_is_not():
    tight = Policy(max_memory=1 << 30)
    assert is_looser(tight, Policy(max_memory=2 << 30))
    assert is_looser(tight, Policy())
    assert not is_looser(tight, Policy(max_memory=1 << 29))


def test_a_default_limit_the_host_cannot_enforce_makes_the_runner_degraded_naming_the_controller():
    policy = Policy(isolation="none", pids=256)
    host = {"flight_limits": {"memory": "v1", "cpu": "v1"}}
    health = judge_health(policy, host, dev=True, started_workers=1)
    assert health.text == "degraded: cgroup controller pids not available"
    assert judge_health(policy, HOST, dev=True, started_workers=1).ok
    assert judge_health(Policy(isolation="none"), {}, dev=True, started_workers=1).ok


def test_a_limit_asked_names_the_one_controller_missing():
    asked = limits.Limits(cpus=1.5, memory=1 << 30)
    assert limits.missing_controller(asked, {"memory": "v1"}) == "cgroup controller cpu not available"
    assert limits.missing_controller(asked, HOST["flight_limits"]) is None


def test_an_oom_kill_reads_with_its_limit():
    assert limits.oom_reason(512 << 20) == "killed: out of memory (limit 512M)"


def test_the_usage_note_says_peak_memory_and_cpu_seconds():
    note = limits.usage_note({"peak_memory": 3 << 20, "cpu_seconds": 1.23456, "oom_kills": 0})
    assert note == {"text": "used peak memory 3M, 1.23 CPU seconds", "peak_memory": "3M",
                    "peak_memory_bytes": 3 << 20, "cpu_seconds": 1.235}
    assert limits.usage_note({}) is None
