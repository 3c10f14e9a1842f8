"""Heartbeats: a parked claim carries the runner's readings and counts as its check-in, and
whatever the server must tell a runner at once answers that claim as an instruction
(docs/lease-protocol.md, "Heartbeats and instructions")."""

from __future__ import annotations

import json
import time

from support import FAST, wait_until


def _sent(fleet, name: str) -> list[dict]:
    path = fleet.root / f"state-{name}" / "sent.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _paths(entries: list[dict], ending: str) -> list[dict]:
    return [e for e in entries if e["path"].endswith(ending)]


def test_an_idle_runner_stays_online_on_its_claims_alone(fleet):
    """Past OFFLINE_AFTER with no full check-in after the first: the re-parked claims (every
    CHECK_IN_INTERVAL, with readings) keep it online and its readings fresh."""
    fleet.runner("idle")
    fleet.wait_online("idle")
    started = time.time()
    offline_after = float(FAST["GG_OFFLINE_AFTER"])

    def long_enough():
        row = fleet.runner_row("idle")
        return row if row["last_seen_at"] > started + offline_after + 1 else None

    row = wait_until(long_enough, timeout=30, what="claims to carry it past OFFLINE_AFTER")
    assert row["online"] is True
    assert row["readings"]["free_slots"] == 1 and "cpu_percent" in row["readings"]
    sent = _sent(fleet, "idle")
    claims = [e for e in _paths(sent, "/claim") if e["body"].get("readings") is not None]
    assert len(claims) >= 3
    check_ins = [e for e in _paths(sent, "/check-in") if e["at"] > started]
    assert check_ins == []  # nothing changed and a claim was parked: no full check-in


def test_a_busy_runner_checks_in_in_full(fleet, tmp_path):
    """No claim parked (its one slot is taken): the check-in goes as before."""
    fleet.runner("busy")
    fleet.wait_online("busy")
    gate = tmp_path / "go"
    api = fleet.api()
    api.open_flight({"command": ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"]})
    wait_until(lambda: fleet.runner_row("busy")["current_flights"], what="the flight to be taken")
    taken = time.time()
    wait_until(lambda: len([e for e in _paths(_sent(fleet, "busy"), "/check-in")
                            if e["at"] > taken]) >= 2, what="full check-ins while busy")
    gate.touch()


def test_a_runner_told_to_drain_stops_claiming_at_once(make_fleet):
    # Check-ins and re-parking are far apart here: only the instruction can tell it in time.
    fleet = make_fleet({"GG_CHECK_IN_INTERVAL": "120", "GG_CLAIM_WAIT": "120",
                        "GG_OFFLINE_AFTER": "300"})
    fleet.runner("d")
    fleet.wait_online("d")
    wait_until(lambda: _paths(_sent(fleet, "d"), "/claim"), what="its claim to park")
    told = time.time()
    done = fleet.gg("runner", "drain", "d")
    assert done.returncode == 0, done.stderr
    wait_until(lambda: "told to drain: taking nothing new" in fleet.log("d"),
               what="the runner to hear the drain")
    wait_until(lambda: [e for e in _paths(_sent(fleet, "d"), "/check-in") if e["at"] >= told],
               what="the full check-in the drain asks for")
    claims = len(_paths(_sent(fleet, "d"), "/claim"))
    flight = fleet.api().open_flight({"command": ["echo", "no"]})
    wait_until(lambda: fleet.api().flight(flight["id"])["waiting"], what="its waiting reason")
    shown = fleet.api().flight(flight["id"])
    assert shown["stage"] == "ready"
    assert len(_paths(_sent(fleet, "d"), "/claim")) == claims  # it claims no more


def test_a_policy_change_reaches_a_parked_runner_at_once(make_fleet):
    fleet = make_fleet({"GG_CHECK_IN_INTERVAL": "120", "GG_CLAIM_WAIT": "120",
                        "GG_OFFLINE_AFTER": "300"})
    fleet.runner("p")
    fleet.wait_online("p")
    wait_until(lambda: _paths(_sent(fleet, "p"), "/claim"), what="its claim to park")
    done = fleet.gg("runner", "policy", "p", "--egress", "none")
    assert done.returncode == 0, done.stderr
    wait_until(lambda: "policy is now" in fleet.log("p") and "egress none" in fleet.log("p"),
               what="the runner to fetch and apply its new policy")
    check_ins = _paths(_sent(fleet, "p"), "/check-in")
    assert len(check_ins) == 2  # the first, and the one the instruction asked for


def test_a_runner_living_on_heartbeats_still_renews_its_credential(make_fleet):
    """The renewal directive travels in a full check-in's answer; a runner that only parks
    claims is told to check in when its credential nears its end, and renews it."""
    fleet = make_fleet({"GG_RUNNER_CREDENTIAL_TTL": "9"})
    fleet.runner("renewing")
    fleet.wait_online("renewing")
    wait_until(lambda: fleet.log("renewing").count("credential renewed") >= 2, timeout=40,
               what="two renewals")
    assert fleet.runner_row("renewing")["online"] is True
