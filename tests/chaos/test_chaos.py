"""Chaos: runners SIGKILLed and SIGSTOPped, the control plane SIGKILLed and restarted, while
flights stream in; then the invariant checker reads the store and every promise must hold.

CI runs a small seeded run (well under two minutes on two cores); ``--runslow`` runs a
larger one. ``GG_CHAOS_SEED=N`` repeats a run's schedule.
"""

from __future__ import annotations

import os

import pytest
from chaos.driver import Chaos, Plan, landing_output

from pg_support import fleet_store

SEED = int(os.environ.get("GG_CHAOS_SEED", "20261129"))


def _prove(outcome) -> None:
    why = outcome.describe()
    assert outcome.report.ok, why
    opened = {f["id"]: f for f in outcome.flights}
    assert set(outcome.expected) <= set(opened), why
    for flight_id, output in outcome.expected.items():
        row = opened[flight_id]
        if row["stage"] == "landed":
            # What landed is exactly the output of the epoch that landed it.
            assert landing_output(outcome.facts[flight_id], row["epoch"]) == output, (flight_id, why)
    landed = sum(1 for f in outcome.flights if f["stage"] == "landed")
    assert landed >= len(outcome.expected) // 2, why
    # It was genuinely chaotic: every kind of violence happened, and leases were lost.
    assert outcome.acts["runner_killed"] and outcome.acts["runner_stopped"], why
    assert len(outcome.restarts) == outcome.plan.server_kills, why
    assert outcome.expired_events >= 1, why
    assert outcome.retried_events >= 1, why  # flaky flights landed on a retry (--retries)


def test_chaos_small_every_invariant_holds(tmp_path, request):
    outcome = Chaos(tmp_path, Plan(seed=SEED), env=fleet_store(request)).run()
    _prove(outcome)
    print(outcome.describe())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_chaos_large_every_invariant_holds(tmp_path):
    plan = Plan(seed=SEED + 1, runners=8, workers=2, flights=240, duration=90.0,
                server_kills=5, settle=240.0)
    outcome = Chaos(tmp_path, plan).run()
    _prove(outcome)
    print(outcome.describe())
