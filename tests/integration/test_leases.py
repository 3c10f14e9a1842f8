"""The lease protocol under failure, with real processes: kill, stall, race, restart."""

from __future__ import annotations

import os
import signal
import threading

import httpx

from support import new_key, wait_until


def _register(fleet, name: str) -> str:
    """Register a runner over the real API; returns its ggr_ credential."""
    answer = fleet.api().register({"name": name}, new_key())
    credential = answer["credential"]
    _check_in(fleet, credential)
    return credential


def _check_in(fleet, credential: str) -> None:
    httpx.post(fleet.url + "/v1/runner/check-in", json={"free_slots": 1},
               headers={"authorization": f"Bearer {credential}"}).raise_for_status()


def test_twenty_concurrent_claimers_racing_for_one_flight_exactly_one_wins(make_fleet):
    # Registering and checking in twenty runners one by one can take longer than the fast
    # OFFLINE_AFTER on a loaded machine; the race is about the claim, not about liveness.
    fleet = make_fleet({"GG_OFFLINE_AFTER": "60"})
    credentials = [_register(fleet, f"racer-{i}") for i in range(20)]
    for credential in credentials:  # all online at the moment of the race
        _check_in(fleet, credential)
    flight = fleet.api().open_flight({"command": ["true"]})
    barrier = threading.Barrier(20)
    answers: list = [None] * 20

    def claim(i: int) -> None:
        with httpx.Client(base_url=fleet.url, timeout=30) as http:
            barrier.wait()
            answers[i] = http.post("/v1/runner/claim", json={"free_slots": 1, "wait": 0},
                                   headers={"authorization": f"Bearer {credentials[i]}"})

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [a for a in answers if a.status_code == 200]
    assert len(winners) == 1, [a.status_code for a in answers]
    assert all(a.status_code == 204 for a in answers if a.status_code != 200)
    assert winners[0].json()["flight"]["id"] == flight["id"]
    assert winners[0].json()["lease"]["epoch"] == 1
    assert len(fleet.api().flight(flight["id"])["attempts"]) == 1


def test_a_parked_claim_is_answered_the_moment_a_flight_opens(fleet):
    credential = _register(fleet, "parked")
    result = {}

    def claim() -> None:
        with httpx.Client(base_url=fleet.url, timeout=30) as http:
            result["answer"] = http.post("/v1/runner/claim", json={"free_slots": 1, "wait": 5},
                                         headers={"authorization": f"Bearer {credential}"})

    t = threading.Thread(target=claim)
    t.start()
    # The claim is parked (nothing to take) before the flight exists.
    wait_until(lambda: fleet.api().events(kind="info:runner:registered"), what="registered")
    flight = fleet.api().open_flight({"command": ["true"]})
    t.join(timeout=10)
    assert result["answer"].status_code == 200
    assert result["answer"].json()["flight"]["id"] == flight["id"]


def test_a_runner_killed_mid_flight_its_flight_lands_elsewhere_at_attempt_two(fleet):
    doomed = fleet.runner("doomed")
    fleet.wait_online("doomed")
    api = fleet.api()
    flight = api.open_flight({"command": ["echo started on attempt $GG_ATTEMPT; sleep 2; echo done"]})
    wait_until(lambda: api.flight(flight["id"])["stage"] == "flying", what="flying on doomed")
    assert api.flight(flight["id"])["runner_name"] == "doomed"
    os.killpg(doomed.proc.pid, signal.SIGKILL)
    doomed.proc.wait()
    fleet.runner("rescuer")
    shown = wait_until(lambda: (lambda f: f if f["stage"] == "landed" else None)(api.flight(flight["id"])),
                       timeout=30, what="the flight to land on the rescuer")
    assert shown["attempt"] == 2
    assert [a["runner_name"] for a in shown["attempts"]] == ["doomed", "rescuer"]
    assert [a["epoch"] for a in shown["attempts"]] == [1, 2]
    expired = [f for f in shown["facts"] if f["kind"] == "expired"]
    assert len(expired) == 1 and expired[0]["runner_id"] is None
    assert expired[0]["body"]["runner"] == shown["attempts"][0]["runner"]
    last_output = [f["body"]["text"] for f in shown["facts"] if f["kind"] == "output"]
    assert "started on attempt 2\n" in "".join(last_output)
    assert len(api.events(kind="info:flight:expired", flight=flight["id"])) == 1


def test_a_stalled_runner_is_fenced_off_and_then_carries_on(fleet):
    stalled = fleet.runner("stalled")
    fleet.wait_online("stalled")
    api = fleet.api()
    flight = api.open_flight({"command": ["echo from $GG_ATTEMPT; sleep 2; echo finished $GG_ATTEMPT"]})
    wait_until(lambda: api.flight(flight["id"])["stage"] == "flying", what="flying on stalled")
    stalled.proc.send_signal(signal.SIGSTOP)  # the runner stalls; its child flies on
    try:
        fleet.runner("replacement")
        shown = wait_until(
            lambda: (lambda f: f if f["stage"] == "landed" else None)(api.flight(flight["id"])),
            timeout=30, what="the replacement to land it")
    finally:
        stalled.proc.send_signal(signal.SIGCONT)
    assert [a["runner_name"] for a in shown["attempts"]] == ["stalled", "replacement"]
    # Resumed, the stalled runner hears it no longer holds the flight in whichever answer
    # comes first: its renewal refused, its report or hand-back refused (the flight reads
    # lost there), or its check-in's list of the flights it held that ended meanwhile.
    fenced = ("lease refused", f"{flight['id']}: lost", f"{flight['id']}: ended by the control plane")
    wait_until(lambda: any(said in fleet.log("stalled") for said in fenced), timeout=20,
               what="the stalled runner to be refused")
    after = api.flight(flight["id"])
    # The replacement's result stands: one exit, from epoch 2, and no fact from epoch 1
    # was accepted after the lease expired.
    exits = [f for f in after["facts"] if f["kind"] == "exit"]
    assert len(exits) == 1 and exits[0]["epoch"] == 2
    expired_at = next(f["at"] for f in after["facts"] if f["kind"] == "expired")
    assert all(f["at"] <= expired_at for f in after["facts"] if f["epoch"] == 1 and f["kind"] != "expired")
    assert after["stage"] == "landed" and after["exit_code"] == 0
    # The stalled runner survives and carries on: it takes and lands new work.
    fleet.wait_online("stalled")
    again = api.open_flight({"command": ["echo back"], "runner": "stalled"})
    wait_until(lambda: api.flight(again["id"])["stage"] == "landed", timeout=30,
               what="the stalled runner to land new work")
    assert stalled.alive()


def test_server_killed_and_restarted_while_flights_fly_loses_nothing(make_fleet):
    # Renewals fall due 2 s after the grant, and a runner stops a flight it could not renew
    # 5 s later (LEASE_MARGIN): time enough for the restart on a loaded machine
    # (docs/lease-protocol.md, "The runner stops what it cannot renew").
    fleet = make_fleet({"GG_LEASE_TTL": "12", "GG_LEASE_RENEW_AT": "10"})
    for name in ("r1", "r2"):
        fleet.runner(name, workers=2)
    fleet.wait_online("r1", "r2")
    api = fleet.api()
    script = "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.5; done"
    ids = [api.open_flight({"command": [script]})["id"] for _ in range(4)]

    def held(flight_id: str) -> bool:
        # Flying on the server is not enough: a grant committed but not yet answered when the
        # server dies is, rightly, re-offered after its lease runs out. Its runner's first
        # fact says the runner holds it.
        row = api.flight(flight_id)
        return row["stage"] == "flying" and any(f["kind"] == "started" for f in row["facts"])

    wait_until(lambda: all(held(i) for i in ids), what="every flight held by its runner")
    fleet.server.stop(sig=signal.SIGKILL)
    fleet.server.start()
    api = fleet.api()

    def all_landed():
        rows = [api.flight(i) for i in ids]
        return rows if all(r["stage"] == "landed" for r in rows) else None

    rows = wait_until(all_landed, timeout=60, what="flights to land after the restart")
    for row in rows:
        output = "".join(f["body"]["text"] for f in row["facts"] if f["kind"] == "output")
        assert output == "".join(f"line {i}\n" for i in range(1, 7)), output
        assert len(row["attempts"]) == 1, "a restart must not expire a healthy lease"
        assert not [f for f in row["facts"] if f["kind"] == "expired"]
    assert api.events(kind="info:flight:expired") == []
    assert all(r.alive() for r in fleet.runners)
