"""Priorities and fair share across real processes: a real ``gg server`` and one real
``gg runner up`` with one worker slot; the start order is read from the claim events."""

from __future__ import annotations

import json

import pytest

from gg.client import ApiError

from support import wait_until

CLAIMED = "info:flight:claimed"


def started(api) -> list[str]:
    """Flight ids in the order the runner was granted them."""
    events = sorted(api.events(kind=CLAIMED, limit=1000), key=lambda e: e["seq"])
    return [e["flight_id"] for e in events]


def test_a_burst_does_not_starve_another_persons_flight_and_high_goes_first(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    owner = fleet.api()
    ada = fleet.api(owner.add_person("ada", False)["token"])
    bob = fleet.api(owner.add_person("bob", False)["token"])
    burst = [ada.open_flight({"command": ["sleep 0.2"], "priority": "low"})["id"]
             for _ in range(200)]
    wait_until(lambda: started(owner), what="the burst to start")
    # Bob's single flight, at the same priority as the burst of 200: it takes the next turn.
    before = len(started(owner))
    single = bob.open_flight({"command": ["sleep 0.2"], "priority": "low"})["id"]
    order = wait_until(lambda: (lambda s: s if single in s else None)(started(owner)),
                       timeout=30, what="bob's flight to start")
    assert order.index(single) <= before + 1, (before, order)  # at most one more of ada's starts first

    # A member may not ask for high; the server says why in one sentence.
    with pytest.raises(ApiError) as refused:
        ada.open_flight({"command": ["true"], "priority": "high"})
    assert refused.value.status == 403
    assert str(refused.value) == "only an admin may open a flight with priority high on this server"

    # An admin's high flight, opened last, starts before every flight still waiting.
    opened = fleet.gg("fly", "--priority", "high", "--json", "--", "sleep 0.2")
    assert opened.returncode == 0, opened.stderr
    urgent = json.loads(opened.stdout)["id"]
    # ... and bob's normal flight, opened after it, goes before the low burst too.
    normal = bob.open_flight({"command": ["sleep 0.2"]})["id"]
    waiting = {f["id"] for f in owner.flights(stage="ready", limit=100)} - {urgent, normal}
    assert waiting, "the burst should still be waiting"
    order = wait_until(lambda: (lambda s: s if normal in s else None)(started(owner)),
                       timeout=30, what="the normal flight to start")
    assert order.index(urgent) < order.index(normal)
    assert not waiting & set(order[:order.index(normal)])

    rows = json.loads(fleet.gg("flights", "--json", "--limit", "100", check=True).stdout)
    priorities = {r["id"]: r["priority"] for r in rows}
    assert (priorities[urgent], priorities[normal], priorities[single]) == ("high", "normal", "low")
    assert {priorities[f] for f in burst if f in priorities} == {"low"}
    assert "  priority  high\n" in fleet.gg("show", urgent, check=True).stdout
    bad = fleet.gg("fly", "--priority", "urgent", "--", "true")
    assert bad.returncode != 0 and bad.stderr.strip() == (
        "--priority must be one of high, normal, low (got 'urgent')")
    for flight in burst:  # the rest need not run
        owner.cancel(flight)
