"""A restart honours every lease for one LEASE_TTL counted from when the server starts
serving, not from when its app was built: start-up time does not come out of the window."""

from __future__ import annotations

from fastapi.testclient import TestClient

from gg.control import flights, leases, people
from gg.control.core import Core
from gg.control.wiring import wired
from gg.domain.flight_spec import FlightSpec
from gg.server.app import create_app
from gg.settings import Settings
from gg.store import open_store

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


def test_the_restart_window_starts_when_the_server_serves(tmp_path, clock, store_url):
    settings = Settings(lease_ttl=3.0, dev=True)
    before = Core(store=open_store(tmp_path, store_url), settings=settings, clock=clock, wiring=wired())
    people.bootstrap(before, tmp_path)
    owner = before.store.person_by_name("owner")
    a = make_runner(before, owner)
    flight = flights.open_flight(before, owner, FlightSpec(command=["true"]))
    check_in(before, a)
    assert leases.try_claim(before, a.id) is not None
    before.store.close()

    clock.advance(300)  # the control plane was away
    app = create_app(settings, open_store(tmp_path, store_url), clock=clock, data_dir=tmp_path)
    clock.advance(2.5)  # a slow start-up: the app is built, the server does not serve yet
    with TestClient(app):
        expires = app.state.core.store.flight(flight.id).lease_expires_at
    app.state.core.store.close()
    assert expires == clock.now + settings.lease_ttl
