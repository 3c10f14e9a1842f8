"""A maintainer whose actions fail waits longer before each new plan, up to a bound, and
says so in its attestation, which gg pools shows."""

from __future__ import annotations

from gg.api.pools import Pool
from gg.cli.pools import _pool_parts
from gg.pool.maintainer import BACKOFF_MAX, backoff_pause


def test_failed_cycles_double_the_pause_up_to_the_bound_and_success_restores_it():
    assert backoff_pause(5.0, 0) == 5.0
    assert [backoff_pause(5.0, n) for n in (1, 2, 3)] == [10.0, 20.0, 40.0]
    assert backoff_pause(5.0, 30) == BACKOFF_MAX
    assert backoff_pause(0.5, 3, most=2.0) == 2.0


def _row(**over) -> Pool:
    data: dict = {"name": "ui-pool", "strategy": "ui", "environment": "ui",
                  "driver": "process", "image": "ui", "size": 6, "warm": 0, "pool_max": 6,
                  "in_force": True, "members": [], "needs_attention": False,
                  "plan": {"actions": [], "in_hours": True}, "waiting": []}
    data.update(over)
    return Pool.model_validate(data)


def test_gg_pools_shows_desired_starting_warm_busy_the_last_decision_and_a_backoff():
    row = _row(scale={"min": 0, "max": 6, "idle_after": 300.0, "step": None, "cool_down": 0.0},
               counts={"desired": 6, "starting": 2, "warm": 1, "busy": 3},
               scaled_reason="scaled ui-pool from 2 to 6: 9 flights waiting, 2 starting",
               scaled_at=90.0, last_attested_at=99.0,
               last_attestation={"backoff": {"failures": 3, "retry_in": 40.0,
                                             "error": "image sha256:ab is not here"}})
    lines = [str(p) for p in _pool_parts(row, now=100.0)]
    assert "(scale 0-6, idle-after 300s, pool-max 6, size 6)" in lines[0]
    assert lines[1] == "  desired 6, starting 2, warm 1, busy 3"
    assert lines[2] == ("  last scaled 10s ago: scaled ui-pool from 2 to 6: 9 flights waiting, "
                        "2 starting")
    assert ("  failing 3 times in a row: image sha256:ab is not here; next try 40s after the "
            "last attestation") in lines
    plain = [str(p) for p in _pool_parts(_row(warm=2), now=100.0)]
    assert "(warm 2, pool-max 6, size 6)" in plain[0]
    assert plain[1] == "  starting 0, warm 0, busy 0"
