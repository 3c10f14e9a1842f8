"""Service flights through their use cases: the spec, who may update it, and the runner
learning a new generation with its renewal. A real SQLite store, no server."""

from __future__ import annotations

import pytest

from gg.control import flights, leases, services
from gg.domain.events import EventKind
from gg.domain.flight_spec import FlightSpec
from gg.errors import BadRequest, Conflict, Forbidden
from gg.settings import Settings

from support import make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


@pytest.fixture
def settings():
    return Settings(dev=True, service_backoff=0.25, service_ready_timeout=9)


def test_a_service_carries_its_spec_with_the_servers_settings_and_no_time_limit(core, ada):
    f = flights.open_flight(core, ada, FlightSpec(command=["serve"], service={"port": 8080,
                                                                   "ready_cmd": None}))
    assert (f.kind, f.timeout) == ("service", None)
    assert f.service == {"generation": 1, "command": ["serve"], "env": {}, "port": 8080,
                         "ready_cmd": None, "backoff": 0.25, "backoff_cap": 30.0,
                         "ready_timeout": 9, "stop_grace": 10.0, "degraded_after": 3}
    activated = flights.open_flight(core, ada, FlightSpec(
        command=["serve"], service={"port": None, "socket_activation": True}))
    assert activated.service["socket_activation"] is True
    with pytest.raises(BadRequest):
        flights.open_flight(core, ada, FlightSpec(command=["serve"], service={}, timeout=60))
    with pytest.raises(BadRequest):
        flights.open_flight(core, ada, FlightSpec(command=["serve"], service={"port": 70000}))


def test_an_update_raises_the_generation_and_the_holder_learns_it_when_it_renews(
        core, owner, ada, bob):
    runner = make_runner(core, owner)
    f = flights.open_flight(core, ada, FlightSpec(command=["serve"], service={}))
    flight, grant = leases.try_claim(core, runner.id)
    with pytest.raises(Forbidden):
        services.update(core, bob, f.id, command=None, env={"V": "2"})
    with pytest.raises(BadRequest):
        services.update(core, ada, f.id, command=None, env={"PORT": "1"})
    spec, _ = services.update(core, ada, f.id, command=None, env={"V": "2"})
    assert (spec["generation"], spec["command"], spec["env"]) == (2, ["serve"], {"V": "2"})
    spec, _ = services.update(core, owner, f.id, command=["serve", "--v3"], env=None)
    assert (spec["generation"], spec["command"], spec["env"]) == (3, ["serve", "--v3"],
                                                                  {"V": "2"})
    renewed = leases.renew(core, core.store.runner(runner.id), f.id, grant.epoch)
    assert renewed["service"]["generation"] == 3
    kinds = [e["body"]["generation"] for e in core.store.events(
        kind=EventKind.SERVICE_UPDATED.value, limit=10)]
    assert sorted(kinds) == [2, 3]
    row = services.list_services(core)[0]
    assert (row["id"], row["wanted_generation"], row["runner_name"]) == (f.id, 3, "r1")


def test_only_a_live_service_is_updated(core, ada):
    work = flights.open_flight(core, ada, FlightSpec(command=["true"]))
    with pytest.raises(Conflict):
        services.update(core, ada, work.id, command=["x"], env=None)
    svc = flights.open_flight(core, ada, FlightSpec(command=["serve"], service={}))
    flights.cancel(core, ada, svc.id)
    with pytest.raises(Conflict):
        services.update(core, ada, svc.id, command=["x"], env=None)
    assert services.list_services(core) == []
