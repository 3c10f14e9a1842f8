"""``GET /metrics``: Prometheus text, no token needed, counts only (no names, no ids)."""

from __future__ import annotations

import gc

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gg.settings import Settings

from support import auth, http_proof, wait_until


@pytest.fixture
def settings():
    return Settings(dev=True, lease_ttl=60, offline_after=45)


def _runner(client, name):
    answer = client.post("/v1/runners", json={"name": name, **http_proof(client, "register")},
                         headers=auth(client.owner)).json()
    credential = answer["credential"]
    assert client.post("/v1/runner/check-in", json={}, headers=auth(credential)).status_code == 200
    return credential, answer["runner"]["id"]


def _scrape(client) -> dict[str, dict[tuple, float]]:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_metrics_need_no_token_and_show_no_names_or_ids(client):
    credential, runner_id = _runner(client, "secret-runner-name")
    flight = client.post("/v1/flights", json={"command": ["echo top-secret"], "labels": {"team": "x"}},
                         headers=auth(client.owner)).json()
    text = client.get("/metrics").text
    for private in ("secret-runner-name", runner_id, flight["id"], "top-secret", "team",
                    client.owner, credential, "owner"):
        assert private not in text
    assert "/metrics" not in client.get("/openapi.json").json()["paths"]


def test_flights_by_stage_runners_by_state_and_leases(client, clock):
    a, _ = _runner(client, "a")
    _runner(client, "b")
    for i in range(3):
        client.post("/v1/flights", json={"command": [f"echo {i}"]}, headers=auth(client.owner))
    clock.advance(2.0)
    got = client.post("/v1/runner/claim", json={"free_slots": 1, "wait": 0}, headers=auth(a))
    assert got.status_code == 200
    clock.advance(50)  # b stops checking in and goes offline; a checks in again
    client.post("/v1/runner/check-in", json={}, headers=auth(a))
    m = _scrape(client)
    assert m["gg_flights"][(("stage", "ready"),)] == 2
    assert m["gg_flights"][(("stage", "flying"),)] == 1
    assert m["gg_flights"][(("stage", "landed"),)] == 0
    key = lambda live: (("health", "ok"), ("liveness", live), ("state", "active"))  # noqa: E731
    assert m["gg_runners"][key("online")] == 1 and m["gg_runners"][key("offline")] == 1
    assert m["gg_leases_live"][()] == 1
    assert m["gg_claims_parked"][()] == 0
    # Queue wait: opened -> first grant, 2 s here; dispatch observes the same grant.
    assert m["gg_flight_queue_wait_seconds_count"][()] == 1
    assert m["gg_flight_queue_wait_seconds_sum"][()] == pytest.approx(2.0)
    assert m["gg_flight_queue_wait_seconds_bucket"][(("le", "1.0"),)] == 0
    assert m["gg_flight_queue_wait_seconds_bucket"][(("le", "2.5"),)] == 1
    assert m["gg_flight_dispatch_seconds_count"][()] == 1


def test_expiries_check_ins_and_requests_are_counted(client, clock):
    a, _ = _runner(client, "a")
    b, _ = _runner(client, "b")
    client.post("/v1/flights", json={"command": ["true"]}, headers=auth(client.owner))
    assert client.post("/v1/runner/claim", json={"wait": 0}, headers=auth(a)).status_code == 200
    clock.advance(61)  # a's lease runs out; a listing records it; b takes it at epoch 2
    client.post("/v1/runner/check-in", json={}, headers=auth(b))
    client.get("/v1/flights", headers=auth(client.owner))
    clock.advance(0.5)
    again = client.post("/v1/runner/claim", json={"wait": 0}, headers=auth(b))
    assert again.json()["lease"]["epoch"] == 2
    client.get("/v1/flights/f_nope", headers=auth(client.owner))
    m = _scrape(client)
    assert m["gg_lease_expiries_total"][()] == 1
    assert m["gg_flight_queue_wait_seconds_count"][()] == 1  # first grants only
    assert m["gg_flight_dispatch_seconds_count"][()] == 2  # every grant
    # the second grant waited 0.5 s after the expiry was recorded
    assert m["gg_flight_dispatch_seconds_bucket"][(("le", "0.25"),)] == 1
    assert m["gg_flight_dispatch_seconds_bucket"][(("le", "0.5"),)] == 2
    assert m["gg_runner_check_ins_total"][()] == 3
    requests = m["gg_http_requests_total"]
    assert requests[(("method", "GET"), ("route", "/v1/flights/{flight_id}"), ("status", "404"))] == 1
    assert requests[(("method", "POST"), ("route", "/v1/runner/claim"), ("status", "200"))] == 2
    assert not any("f_nope" in str(k) for k in requests)
    # A second scrape does not count the same events twice.
    assert _scrape(client)["gg_lease_expiries_total"][()] == 1


GAUGE = "gg_flight_expected_wait_longest_seconds"


def test_the_longest_expected_wait_is_gauged_per_environment(client, clock):
    runner, _ = _runner(client, "a")
    owner = auth(client.owner)
    assert _scrape(client).get(GAUGE, {}) == {}  # no flight waits: no sample
    for _ in range(3):
        client.post("/v1/flights", json={"command": ["make"]}, headers=owner)
        lease = client.post("/v1/runner/claim", json={"wait": 0}, headers=auth(runner)).json()
        clock.advance(30)
        client.post("/v1/runner/check-in", json={}, headers=auth(runner))
        done = client.post(f"/v1/runner/flights/{lease['flight']['id']}/hand-back",
                           json={"epoch": lease["lease"]["epoch"], "outcome": "landed",
                                 "exit_code": 0}, headers=auth(runner))
        assert done.status_code == 200, done.text
    for _ in range(3):  # one flies, two wait: the last starts after about a minute
        client.post("/v1/flights", json={"command": ["make"]}, headers=owner)
    assert client.post("/v1/runner/claim", json={"wait": 0}, headers=auth(runner)).status_code == 200
    longest = _scrape(client)[GAUGE]
    assert list(longest) == [(("environment", ""),)]
    assert 50 < longest[(("environment", ""),)] < 70


def test_the_writers_group_commits_are_counted_with_their_units_and_seconds_by_phase(client):
    before = _scrape(client)
    a, _ = _runner(client, "a")
    for i in range(3):
        client.post("/v1/flights", json={"command": [f"echo {i}"]}, headers=auth(client.owner))
    assert client.post("/v1/runner/claim", json={"wait": 0}, headers=auth(a)).status_code == 200
    m = _scrape(client)
    commits = m["gg_store_commits_total"][()] - before["gg_store_commits_total"][()]
    units = m["gg_store_commit_units_total"][()] - before["gg_store_commit_units_total"][()]
    assert commits >= 1 and units >= 4 and units >= commits  # three opens and a claim, at least
    spent = {phase: m["gg_store_commit_seconds_total"][(("phase", phase),)]
             for phase in ("begin", "work", "commit")}
    assert all(seconds >= 0 for seconds in spent.values()) and spent["work"] > 0


def test_the_event_loops_lag_is_a_histogram_filled_while_the_server_runs(client):
    """The lag task wakes every 50 ms and records how late it woke: the measure of anything
    that blocks the loop (gg.server.loop_lag)."""
    def woke() -> float:
        return _scrape(client).get("gg_event_loop_lag_seconds_count", {}).get((), 0)

    wait_until(lambda: woke() >= 3, timeout=30, what="the lag task woke three times")
    m = _scrape(client)
    buckets = {dict(k)["le"]: v for k, v in m["gg_event_loop_lag_seconds_bucket"].items()}
    assert buckets["+Inf"] == m["gg_event_loop_lag_seconds_count"][()] >= 3
    assert m["gg_event_loop_lag_seconds_sum"][()] >= 0


def test_the_garbage_collectors_pauses_are_a_histogram_by_generation(client):
    """Each collection the server's process makes while it runs is counted with how long it
    held every thread, by generation (gg.server.collector_pauses)."""
    def collections(generation: str) -> float:
        return _scrape(client).get("gg_gc_pause_seconds_count", {}).get(
            (("generation", generation),), 0)

    before = collections("2")
    gc.collect()  # a collection of the oldest generation, made in the server's process
    m = _scrape(client)
    assert collections("2") == before + 1
    for generation in ("0", "1", "2"):
        buckets = {dict(k)["le"]: v for k, v in m["gg_gc_pause_seconds_bucket"].items()
                   if dict(k)["generation"] == generation}
        assert buckets["+Inf"] == m["gg_gc_pause_seconds_count"][(("generation", generation),)]
        assert list(buckets.values()) == sorted(buckets.values())  # cumulative
    assert m["gg_gc_pause_seconds_sum"][(("generation", "2"),)] > 0
    client.app.state.collector_pauses.stop()
    gc.collect()
    assert collections("2") == before + 1  # a stopped server counts no more
    client.app.state.collector_pauses.start()
