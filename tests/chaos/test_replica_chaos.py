"""Chaos across replicas (tests/chaos/replica_driver.py): three replicas on one PostgreSQL
database, six runners each using a different replica first, 300 flights; one replica
SIGKILLed and started again twice, one runner SIGKILLed while it holds a flight. Every
flight lands once, no (flight, epoch) is granted twice, every invariant holds, and no event
is recorded twice. ``--runslow`` runs a larger one."""

from __future__ import annotations

import pytest
from chaos.driver import landing_output
from chaos.replica_driver import ReplicaChaos, ReplicaPlan


def _prove(outcome) -> None:
    why = outcome.describe()
    assert outcome.report.ok, why
    assert outcome.grants[0] == outcome.grants[1], why  # no (flight, epoch) granted twice
    assert outcome.duplicates == [], (outcome.duplicates, why)
    assert len(outcome.expected) == outcome.plan.flights, why
    opened = {f["id"]: f for f in outcome.flights}
    for flight_id, output in outcome.expected.items():
        row = opened[flight_id]
        assert row["stage"] == "landed", (flight_id, why)
        # What landed is exactly the output of the epoch that landed it, reported once.
        assert landing_output(outcome.facts.get(flight_id, []), row["epoch"]) == output, (flight_id, why)
    assert all(f["stage"] == "landed" for f in outcome.flights), why
    assert len(outcome.acts) == outcome.plan.replica_kills + 2, why
    assert outcome.expired_events >= 1, why  # the killed runner's lease was lost and re-offered


@pytest.mark.timeout(300)  # about a minute on a loaded 2-core machine; more when it is busier
def test_chaos_across_three_replicas_every_flight_lands_once(tmp_path, pg_cluster):
    chaos = ReplicaChaos(tmp_path, pg_cluster.new_database(), ReplicaPlan())
    outcome = chaos.run()
    print(outcome.describe())
    _prove(outcome)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_chaos_across_three_replicas_large(tmp_path, pg_cluster):
    plan = ReplicaPlan(runners=9, workers=2, flights=1000, replica_kills=4, settle=600.0)
    chaos = ReplicaChaos(tmp_path, pg_cluster.new_database(), plan)
    outcome = chaos.run()
    print(outcome.describe())
    _prove(outcome)
