"""Retries through the use cases on a real store with a hand-moved clock: a delayed retry is
not offered before its time and is once it is due; an environment's default applies; the
runner of the failed attempt is refused its stale epoch."""

from __future__ import annotations

import pytest

from gg.control import flights, leases
from gg.control import retries as retry_ops
from gg.domain.flight_spec import FlightSpec
from gg.domain.retries import Retry
from gg.errors import GGError

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")


def _fail(core, runner, flight_id: str, epoch: int) -> dict:
    return leases.hand_back(core, core.store.runner(runner.id), flight_id, epoch=epoch,
                            outcome="failed", exit_code=1, reason="exit 1", key=f"{epoch}:hb")


def test_a_delayed_retry_is_not_offered_before_its_time_and_is_once_due(core, owner, clock):
    runner = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["x"],
                                                    retry=Retry(retries=1, delay=30.0)))
    flight, grant = leases.try_claim(core, runner.id)
    assert _fail(core, runner, f.id, grant.epoch)["stage"] == "ready"
    assert core.store.next_lease_expiry() == clock.now + 30.0  # the dispatcher looks then
    clock.advance(29.0)
    check_in(core, runner)
    assert leases.try_claim(core, runner.id) is None  # ready, free runner, and not offered
    shown = flights.show_flight(core, f.id, estimate=False)
    assert shown["waiting"].startswith("waiting: retry 1 of 1 is offered at ")
    assert shown["waiting"].endswith("(in 1s), after exit 1")
    clock.advance(1.0)
    again, grant2 = leases.try_claim(core, runner.id)
    assert (again.id, grant2.epoch, again.attempt) == (f.id, 2, 2)
    with pytest.raises(GGError) as refused:  # the failed attempt's epoch is fenced off
        leases.report(core, core.store.runner(runner.id), f.id, epoch=grant.epoch,
                      facts=[{"kind": "output", "body": {"text": "late"}}])
    assert refused.value.code == "lease_superseded"


def test_a_flight_takes_its_environments_default_unless_it_says(core, owner):
    core.store.save_root_retries({"ui": Retry(retries=2, delay=5.0)})
    assert retry_ops.settle(core, None, "ui") == Retry(retries=2, on=("failed",), delay=5.0,
                                                       elsewhere=False)
    assert retry_ops.settle(core, Retry(retries=0), "ui") is None
    assert retry_ops.settle(core, None, "api") is None
    assert core.store.root_retries() == {"ui": Retry(retries=2, delay=5.0)}
    assert retry_ops.settle(core, Retry(delay=9.0), "ui").delay == 9.0
    with pytest.raises(GGError) as refused:  # a delay for retries nobody asked for
        retry_ops.settle(core, Retry(delay=9.0), "api")
    assert refused.value.status == 400 and "need --retries N" in str(refused.value)
