"""Concurrency keys and a grace per flight across real processes (docs/jobs.md): a real
control plane, real runners over loopback, the real CLI.

No two flights of one key ever fly at once: that is read after the fact from the audit
events (each grant and each end, in the order they were recorded), never from timing.
"""

from __future__ import annotations

import httpx

from support import wait_until

KEY = "deploy-prod"
GATED = "while [ ! -e {gate} ]; do sleep 0.05; done"
CLAIMED = "info:flight:claimed"
STOPS = tuple(f"info:flight:{k}" for k in ("landed", "failed", "cancelled", "expired",
                                           "returned"))


def _flight(fleet, flight_id: str) -> dict:
    return fleet.api().flight(flight_id)


def _stage(fleet, flight_id: str, *stages: str):
    data = _flight(fleet, flight_id)
    return data if data["stage"] in stages else None


def _fly(fleet, *args: str) -> str:
    opened = fleet.gg("fly", *args)
    assert opened.returncode == 0, opened.stderr
    return opened.stdout.strip()


def most_at_once(events: list[dict], ids: set[str]) -> int:
    """The most flights of ``ids`` flying at once, walking the audit events in the order
    they were recorded: a grant starts one, an end (or an expiry) stops it."""
    flying: set[str] = set()
    most = 0
    for e in sorted(events, key=lambda e: e["seq"]):
        fid = e.get("flight_id")
        if fid not in ids:
            continue
        if e["kind"] == CLAIMED:
            flying.add(fid)
            most = max(most, len(flying))
        elif e["kind"] in STOPS:
            flying.discard(fid)
    return most


def flight_events(fleet) -> list[dict]:
    return fleet.api().events(kind="info:flight:", limit=10000)


def test_one_key_flies_one_at_a_time_says_why_the_rest_wait_and_every_flight_lands(
        make_fleet, tmp_path):
    # a long claim wait: a flight held back by its key moves only by push, never by a
    # claim that timed out and asked again
    fleet = make_fleet({"GG_CLAIM_WAIT": "60"})
    names = ["r1", "r2", "r3", "r4"]
    for name in names:
        fleet.runner(name, workers=2)
    fleet.wait_online(*names)
    gate = tmp_path / "gate"
    api = fleet.api()
    first = api.open_flight({"command": ["sh", "-c", GATED.format(gate=gate)],
                             "concurrency": {"key": KEY}, "grace": 2})["id"]
    wait_until(lambda: _stage(fleet, first, "flying"), what="the first flight to fly")
    second = api.open_flight({"command": ["true"], "concurrency": {"key": KEY}})["id"]

    # the waiting sentence, from gg show and from the API, before any runner rung
    said = f"waiting: 1 flight with concurrency key {KEY} is flying (limit 1): {first}"
    shown = fleet.gg("show", second)
    assert said in shown.stdout, shown.stdout
    assert f"concurrency {KEY} (at most 1 at once)" in shown.stdout
    assert "grace     5s from SIGTERM to SIGKILL" in shown.stdout  # the default
    data = _flight(fleet, second)
    assert (data["stage"], data["waiting"]) == ("ready", said)
    assert data["concurrency"] == {"key": KEY, "limit": 1, "cancel_in_progress": False}
    assert (data["grace"], _flight(fleet, first)["grace"]) == (5.0, 2.0)
    plan = fleet.gg("plan", second)
    assert f"no other flight with concurrency key {KEY} is flying" in plan.stdout, plan.stdout

    # bad input: one sentence and nothing opened, from the CLI (tests/cli/test_errors.py
    # has each sentence) and from the API alike
    before = len(fleet.api().flights(limit=1000))
    refused = fleet.gg("fly", "--concurrency", f"{KEY}:0", "--", "true")
    assert refused.returncode != 0 and "N is a whole number" in refused.stderr, refused.stderr
    http = httpx.Client(base_url=fleet.url,
                        headers={"Authorization": f"Bearer {fleet.server.owner_token()}"})
    for body in ({"concurrency": {"key": "a b"}}, {"concurrency": {"key": ""}},
                 {"concurrency": {"key": KEY, "limit": 0}},
                 {"concurrency": {"key": KEY, "limit": "two"}},
                 {"grace": 601}, {"grace": 0}):
        answer = http.post("/v1/flights", json={"command": ["true"], **body})
        assert 400 <= answer.status_code < 500, (body, answer.status_code, answer.text)
        assert answer.json()["error"]["message"], answer.text
    assert len(fleet.api().flights(limit=1000)) == before

    # 18 more of the key on 8 free slots: one at a time, and every one lands
    rest = [api.open_flight({"command": ["true"], "concurrency": {"key": KEY}})["id"]
            for _ in range(18)]
    gate.write_text("go")
    ids = {first, second, *rest}
    wait_until(lambda: all(_stage(fleet, f, "landed") for f in ids), timeout=90,
               what="every flight of the key to land")
    assert most_at_once(flight_events(fleet), ids) == 1


def test_two_replicas_on_postgresql_never_fly_two_flights_of_one_key_at_once(make_replicas):
    replicas = make_replicas(2, {})
    for name, first in (("a", 0), ("b", 1), ("c", 1)):
        replicas.runner(name, first=first, only=True, workers=2)
    # claims parked on both replicas before any flight opens, so grants race across them
    wait_until(lambda: {"a", "b", "c"} <= {r["name"] for r in replicas.api(0).runners()
                                            if r["online"]}, 60, what="runners a, b, c online")
    ids = [replicas.api(i % 2).open_flight({"command": ["sleep", "0.2"],
                                             "concurrency": {"key": KEY}})["id"]
           for i in range(8)]
    wait_until(lambda: all(replicas.api(1).flight(f)["stage"] == "landed" for f in ids),
               timeout=120, what="every flight of the key to land")
    events = replicas.api(0).events(kind="info:flight:", limit=10000)
    assert most_at_once(events, set(ids)) == 1
    # Which runner wins each grant is the race's to decide (a landing wakes the claims parked
    # on its own replica first), so no runner is asserted: the rule is what must hold.


def test_cancel_in_progress_leaves_only_the_newest_and_a_1s_grace_kills_after_sigterm(
        fleet, tmp_path):
    fleet.runner("r1", workers=2)
    fleet.wait_online("r1")
    gate = tmp_path / "gate"
    # --cancel-in-progress: a new flight cancels the older ones of its key, flying or not
    api = fleet.api()
    flying = api.open_flight({"command": ["sh", "-c", GATED.format(gate=gate)],
                              "concurrency": {"key": "ci"}})["id"]
    wait_until(lambda: _stage(fleet, flying, "flying"), what="the older flight to fly")
    waiting = api.open_flight({"command": ["true"], "concurrency": {"key": "ci"}})["id"]
    newest = _fly(fleet, "--concurrency", "ci", "--cancel-in-progress", "--", "true")
    for old in (flying, waiting):
        data = wait_until(lambda old=old: _stage(fleet, old, "cancelled"),
                          what="the older flight cancelled")
        assert newest in data["ended_reason"], data["ended_reason"]
        assert newest in data["ended"]
    wait_until(lambda: _stage(fleet, newest, "landed"), timeout=30, what="the newest to land")
    gate.write_text("go")

    # it says it got TERM and goes on; only the SIGKILL after its grace ends it
    flight = _fly(fleet, "--grace", "1s", "--timeout", "1s", "--", "sh", "-c",
                  "trap 'echo got-term' TERM; echo started; while :; do sleep 0.1; done")
    data = wait_until(lambda: _stage(fleet, flight, "failed"), timeout=60,
                      what="the flight to be stopped")
    assert data["ended_reason"] == "timed out after 1s"
    output = "".join(f["body"].get("text", "") for f in data["facts"] if f["kind"] == "output")
    assert "got-term" in output, output
    assert data["grace"] == 1.0
