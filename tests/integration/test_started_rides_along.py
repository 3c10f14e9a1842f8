"""A flight's `started` fact rides with its first output or its hand-back, dated when the
flight started; alone only once ``GG_STARTED_WITHIN`` passed with nothing sent
(docs/lease-protocol.md, "A flight's requests"). Real server, real runner processes; what the
runner sent is read from its sent log."""

from __future__ import annotations

import json

from support import wait_until


def _sent(fleet, name: str, flight_id: str) -> list[dict]:
    """Every request the runner sent about ``flight_id``, in order."""
    path = fleet.root / f"state-{name}" / "sent.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if f"/{flight_id}/" in r["path"]]


def _landed(api, flight_id: str) -> dict:
    return wait_until(lambda: (lambda f: f if f["stage"] == "landed" else None)(api.flight(flight_id)),
                      timeout=30, what=f"{flight_id} to land")


def _started_only(request: dict) -> bool:
    facts = (request.get("body") or {}).get("facts") or []
    return request["path"].endswith("/facts") and [f["kind"] for f in facts] == ["started"]



def _flown(make_fleet, command: str) -> tuple[dict, list[dict]]:
    """``command`` flown to its landing on one runner that holds `started` up to 60 s: the
    flight as shown, and every request the runner sent about it."""
    fleet = make_fleet({"GG_STARTED_WITHIN": "60"})
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    flight = api.open_flight({"command": [command]})
    return _landed(api, flight["id"]), _sent(fleet, "r1", flight["id"])

def test_a_quiet_flight_sends_started_with_its_hand_back_dated_when_it_started(make_fleet):
    shown, sent = _flown(make_fleet, "sleep 1")
    assert not any(r["path"].endswith("/facts") for r in sent), sent  # no report of its own
    hand_back = next(r for r in sent if r["path"].endswith("/hand-back"))
    # and what it used rides along too (gg.domain.limits' usage note)
    assert [f["kind"] for f in hand_back["body"]["facts"]] == ["started", "note"]
    assert hand_back["body"]["facts"][1]["key"] == "1:usage"
    assert hand_back["body"]["facts"][0]["ago"] >= 1.0  # it slept a second after starting
    facts = shown["facts"]
    kinds = [f["kind"] for f in facts]
    assert kinds.count("started") == 1 and kinds.index("started") < kinds.index("exit")
    started = next(f for f in facts if f["kind"] == "started")
    ended = next(f for f in facts if f["kind"] == "exit")
    granted = next(f for f in facts if f["kind"] == "granted") if "granted" in kinds else None
    # Dated when it started, not when it arrived: the whole second of sleep lies between.
    assert ended["at"] - started["at"] >= 1.0
    if granted is not None:
        assert started["at"] >= granted["at"]
    assert started["epoch"] == 1 and started["body"]["workspace"]


def test_a_flight_that_prints_sends_started_with_its_first_output(make_fleet):
    shown, sent = _flown(make_fleet, "echo hello; sleep 1; echo bye")
    reports = [r for r in sent if r["path"].endswith("/facts")]
    assert reports and not any(_started_only(r) for r in reports), reports
    first = [f["kind"] for f in reports[0]["body"]["facts"]]
    assert first[0] == "started" and "output" in first
    hand_back = next(r for r in sent if r["path"].endswith("/hand-back"))
    assert [f["key"] for f in hand_back["body"]["facts"]] == ["1:usage"]  # no `started`
    kinds = [f["kind"] for f in shown["facts"]]
    assert kinds.count("started") == 1 and kinds.index("started") < kinds.index("output")
    assert "".join(f["body"]["text"] for f in shown["facts"] if f["kind"] == "output") == "hello\nbye\n"


def test_a_slow_silent_flight_sends_started_alone_once_the_bound_passed(make_fleet):
    # A long lease: the lease keeper's first renewal is 40 s away, so only the bound sends it.
    fleet = make_fleet({"GG_STARTED_WITHIN": "0.3", "GG_LEASE_TTL": "60", "GG_LEASE_RENEW_AT": "20"})
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    flight = api.open_flight({"command": ["sleep 30"]})
    # Watchers learn of the start while it still flies, from a report of its own.
    wait_until(lambda: any(f["kind"] == "started" for f in api.flight(flight["id"])["facts"]),
               timeout=20, what="the started fact while it flies")
    assert api.flight(flight["id"])["stage"] == "flying"
    alone = [r for r in _sent(fleet, "r1", flight["id"]) if _started_only(r)]
    assert len(alone) == 1 and alone[0]["body"]["facts"][0]["ago"] >= 0.3
    api.request("POST", f"/v1/flights/{flight['id']}/cancel")
    wait_until(lambda: api.flight(flight["id"])["stage"] == "cancelled", what="cancelled")
