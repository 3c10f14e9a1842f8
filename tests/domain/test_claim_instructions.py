"""What a heartbeat claim is answered with at once, before it parks."""

from __future__ import annotations

from gg.domain.runners import Instruction, Runner, instruction_at_claim, parked_wait, policy_digest

NOW = 1_000_000.0
POLICY = {"isolation": "sandbox", "egress": "all", "workers": 1}


def _told(runner: Runner, **kw):
    args = dict(stated_policy=policy_digest(POLICY), free_slots=1, now=NOW, renew_window=100.0,
                renews=True, has_capabilities=True)
    return instruction_at_claim(runner, **{**args, **kw})


def _runner(**kw) -> Runner:
    return Runner(id="r_1", name="a", policy=POLICY, credential_expires_at=NOW + 1000, **kw)


def test_an_active_runner_with_its_policy_parks():
    assert _told(_runner()) is None


def test_a_draining_or_drained_runner_that_claims_is_told_to_drain():
    assert _told(_runner(admin_state="draining")) is Instruction.DRAIN
    assert _told(_runner(admin_state="drained")) is Instruction.DRAIN
    assert _told(_runner(admin_state="draining"), free_slots=0) is None  # stopping anyway


def test_a_runner_applying_another_policy_is_told_it_changed():
    assert _told(_runner(), stated_policy=policy_digest({})) is Instruction.POLICY_CHANGED
    assert _told(_runner(), stated_policy=None) is None  # it did not say: nothing to compare


def test_a_credential_near_its_end_or_no_capability_report_asks_for_a_full_check_in():
    assert _told(_runner(), renew_window=1001.0) is Instruction.CHECK_IN
    assert _told(_runner(), renew_window=1001.0, renews=False) is None  # a member never renews
    assert _told(_runner(), has_capabilities=False) is Instruction.CHECK_IN


def test_the_policy_digest_ignores_key_order():
    assert policy_digest({"a": 1, "b": 2}) == policy_digest({"b": 2, "a": 1})
    assert policy_digest({"a": 1}) != policy_digest({"a": 2})


def test_a_console_no_check_in_has_named_yet_is_told_on_the_claim():
    assert _told(_runner(), console_unheard=True) is Instruction.CONSOLE
    assert _told(_runner(), console_unheard=False) is None  # heard: its check-ins name it
    # what must be heard first still comes first
    assert _told(_runner(admin_state="draining"), console_unheard=True) is Instruction.DRAIN


def test_a_parked_claim_ends_within_the_last_spread_seconds_of_its_wait_and_never_before_three_quarters():
    assert parked_wait(20, 4, 0.0) == 20  # the draw's low end: the whole wait
    assert parked_wait(20, 4, 0.5) == 18
    assert 16 < parked_wait(20, 4, 0.999) < 16.01  # near its last four seconds' start
    assert parked_wait(2, 4, 0.999) > 1.5  # a short wait keeps three quarters at the least
    assert parked_wait(15, 0, 0.9) == 15  # no spread: the wait asked
    assert parked_wait(0, 4, 0.9) == 0  # a claim that does not park
