"""Dependencies between flights (``gg fly --after``) across real processes: a real
``gg server`` (restarted once), real ``gg runner up`` processes, the real CLI; and two
replicas on one PostgreSQL database. The order is read from the events (a dependent's
claim comes after its dependency's landing), never from timing (docs/work-graphs.md)."""

from __future__ import annotations

import json

import pytest

from gg.client import ApiError

from support import wait_until


def fly(fleet, *args: str) -> str:
    """Open a flight with the real CLI; its id."""
    done = fleet.gg("fly", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"]


def held_until(path) -> str:
    """A command that runs until the test creates ``path`` (the flight is flying meanwhile)."""
    return f"while [ ! -e {path} ]; do sleep 0.05; done"


def seq_of(api, kind: str, flight_id: str) -> int:
    events = api.events(kind=kind, flight=flight_id, limit=100)
    assert events, (kind, flight_id)
    return min(e["seq"] for e in events)


def ended(api, flight_id: str, *stages: str):
    return wait_until(lambda: (lambda f: f if f["stage"] in stages else None)(
        api.flight(flight_id)), timeout=60, what=f"{flight_id} to end {stages}")


def test_a_chain_lands_in_order_a_failure_cancels_two_deep_and_a_restart_still_releases(
        fleet, tmp_path):
    fleet.runner("r1", workers=3)  # free slots: a held flight would be taken if offered
    fleet.wait_online("r1")
    api = fleet.api()

    # build -> test -> publish: test waits while build flies, and says so
    build = fly(fleet, "--title", "build", "--", held_until(tmp_path / "built"))
    test = fly(fleet, "--after", f"{build},{build}", "--title", "test", "--", "true")
    publish = fly(fleet, "--after", test, "--", "true")
    wait_until(lambda: api.flight(build)["stage"] == "flying", what="build to fly")
    sentence = f"waiting: {build} (build) is still flying"
    assert api.flight(test)["waiting"] == sentence
    shown = fleet.gg("show", test, check=True).stdout
    assert sentence in shown and f"  after     {build} (build) flying" in shown
    assert f"  before    {publish} " in shown
    plan = fleet.gg("plan", test, check=True).stdout
    assert f"✗ dependency {build} (build) has landed (it is flying;" in plan
    assert f"{build}'s opener (owner): gg show {build}" in plan and "runner r1, flying it" in plan
    answer = json.loads(fleet.gg("show", "--json", build, check=True).stdout)
    assert [d["id"] for d in answer["dependents"]] == [test]
    assert api.flight(test)["stage"] == api.flight(publish)["stage"] == "ready"
    (tmp_path / "built").touch()
    ended(api, publish, "landed")
    assert seq_of(api, "info:flight:landed", build) < seq_of(api, "info:flight:claimed", test)
    assert seq_of(api, "info:flight:landed", test) < seq_of(api, "info:flight:claimed", publish)

    # a failed build cancels two levels of dependents, each naming it; --after-any runs
    broken = fly(fleet, "--title", "broken", "--",
                 held_until(tmp_path / "break") + "; exit 3")
    child = fly(fleet, "--after", broken, "--", "true")
    grandchild = fly(fleet, "--after", child, "--", "true")
    cleanup = fly(fleet, "--after", broken, "--after-any", "--", "true")
    (tmp_path / "break").touch()
    for flight_id in (child, grandchild):
        gone = ended(api, flight_id, "cancelled", "landed")
        assert (gone["stage"], gone["ended_reason"]) == ("cancelled", f"dependency {broken} failed")
    cancelled = api.events(kind="info:flight:cancelled", flight=grandchild, limit=10)
    assert cancelled[0]["body"]["dependency"] == broken
    assert ended(api, cleanup, "landed", "cancelled")["stage"] == "landed"

    # refusals: one sentence, a non-zero exit or a 4xx, and nothing opened
    before = len(api.flights(limit=1000))
    bad = fleet.gg("fly", "--after", "f_0000000000", "--", "true")
    assert bad.returncode != 0 and bad.stderr.strip() == (
        "--after: no flight f_0000000000 in this organisation")
    bad = fleet.gg("fly", "--after", broken, "--", "true")
    assert bad.returncode != 0 and bad.stderr.strip().startswith(
        f"dependency {broken} already failed")
    with pytest.raises(ApiError) as refused:
        api.open_flight({"command": ["true"], "after": [f"f_{i:010x}" for i in range(101)]})
    assert refused.value.status == 400
    assert str(refused.value) == "--after names 101 flights; a flight may depend on at most 100"
    assert len(api.flights(limit=1000)) == before

    # a dependent waiting across a restart of the server is still released when it lands
    slow = fly(fleet, "--", held_until(tmp_path / "restarted"))
    last = fly(fleet, "--after", slow, "--", "true")
    wait_until(lambda: api.flight(slow)["stage"] == "flying", what="the slow flight to fly")
    fleet.server.stop()
    fleet.server.start()
    assert api.flight(last)["waiting"] == f"waiting: {slow} ({held_until(tmp_path / 'restarted')}) is still flying"
    (tmp_path / "restarted").touch()
    assert ended(api, last, "landed", "cancelled")["stage"] == "landed"
    assert seq_of(api, "info:flight:landed", slow) < seq_of(api, "info:flight:claimed", last)


def test_a_dependency_landing_on_one_replica_releases_a_dependent_to_a_claim_parked_on_another(
        make_replicas):
    replicas = make_replicas(2)
    first, second = replicas.api(0), replicas.api(1)
    build = first.open_flight({"command": ["true"], "labels": {"role": "build"}})["id"]
    test = second.open_flight({"command": ["true"], "labels": {"role": "test"},
                               "after": [build]})["id"]
    assert second.flight(test)["waiting"].startswith(f"waiting: {build} ")
    replicas.runner("tester", first=1, only=True, labels="role=test")
    wait_until(lambda: any(r["online"] for r in second.runners()), what="tester online")
    replicas.runner("builder", first=0, only=True, labels="role=build")
    landed = wait_until(lambda: (lambda f: f if f["stage"] == "landed" else None)(
        second.flight(test)), timeout=60, what="the dependent to land")
    assert landed["attempt"] == 1
    assert seq_of(first, "info:flight:landed", build) < seq_of(first, "info:flight:claimed", test)
