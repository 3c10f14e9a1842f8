"""Dependencies between flights (``gg fly --after``) across real processes: a real
``gg server`` (restarted once), real ``gg runner up`` processes, the real CLI; and two
replicas on one PostgreSQL database. The order is read from the events (a dependent's
claim comes after its dependency's landing), never from timing (docs/work-graphs.md)."""

from __future__ import annotations

import json
import re

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


THREE_STAGES = """\
flights:
  build:
    command: [sh, -c, "{build}"]
  test-1: {{command: [sh, -c, "echo one"], needs: [build], timeout: 5m}}
  test-2: {{command: [sh, -c, "echo two"], needs: [build], labels: {{shard: "2"}}}}
  test-3: {{command: [sh, -c, "echo three"], needs: build}}
  publish:
    command: [sh, -c, "echo publish"]
    needs: [test-1, test-2, test-3]
"""


def fly_file(fleet, tmp_path, name: str, text: str, *args: str):
    path = tmp_path / name
    path.write_text(text)
    return fleet.gg("fly", "--file", str(path), *args), path


def test_a_file_of_three_stages_lands_in_order_and_a_failed_build_cancels_the_graph_below_it(
        fleet, tmp_path):
    fleet.runner("r1", labels="shard=2", workers=3)  # free slots: a held test would be taken
    fleet.wait_online("r1")
    api = fleet.api()

    # bad files: one sentence at file:line:key each, and not one flight opened
    bad = {
        "cycle.yaml": ("flights:\n  a: {command: [echo, ok], needs: [b]}\n"
                       "  b: {command: [echo, ok], needs: [a]}\n",
                       ":2: flights.a.needs: needs go round in a cycle (a -> b -> a): no "
                       "flight of it could ever start"),
        "unknown.yaml": ("flights:\n  a:\n    command: [echo, ok]\n    needs: [bulid]\n",
                         ":4: flights.a.needs[0]: no flight 'bulid' in this file (its flights "
                         "are a)"),
        "option.yaml": ("flights:\n  a: {command: [echo, ok]}\n  b:\n    command: [echo, ok]\n"
                        "    timeout: soon\n",
                        ":5: flights.b.timeout: 'soon' is not a duration (try 30, 500ms, 10m, "
                        "12h or 30d)"),
        "refused.yaml": ("flights:\n  a: {command: [echo, ok]}\n  b: {command: [echo, ok], env: prod}\n",
                         None),
    }
    before = len(api.flights(limit=1000))
    for name, (text, sentence) in bad.items():
        done, path = fly_file(fleet, tmp_path, name, text)
        assert done.returncode != 0 and done.stdout == "", (name, done.stderr)
        if sentence is not None:
            assert done.stderr == f"{path}{sentence}\n", name
        else:  # refused by the server: the flight named, and the others not opened either
            assert done.stderr.startswith("flight b: ") and "prod" in done.stderr
            assert len(done.stderr.strip().splitlines()) == 1
    assert len(api.flights(limit=1000)) == before

    # build -> test x3 -> publish, opened at once: each name with its id
    gate = tmp_path / "built"
    done, _ = fly_file(fleet, tmp_path, "three.yaml", THREE_STAGES.format(
        build=f"while [ ! -e {gate} ]; do sleep 0.05; done"), "--json")
    assert done.returncode == 0, done.stderr
    opened = json.loads(done.stdout)
    assert [f["name"] for f in opened] == ["build", "test-1", "test-2", "test-3", "publish"]
    assert all(set(f) == {"name", "id"} for f in opened)
    ids = {f["name"]: f["id"] for f in opened}
    wait_until(lambda: api.flight(ids["build"])["stage"] == "flying", what="build to fly")
    assert api.flight(ids["test-1"])["waiting"] == f"waiting: {ids['build']} (build) is still flying"
    drawn = fleet.gg("flights", "--graph", ids["test-2"], check=True).stdout
    for name, flight_id in ids.items():
        stage = "flying" if name == "build" else "ready"
        assert re.search(rf"{name}\s+{flight_id}\s+{stage}", drawn), (name, drawn)
    gate.touch()
    ended(api, ids["publish"], "landed")
    for test in ("test-1", "test-2", "test-3"):
        assert seq_of(api, "info:flight:landed", ids["build"]) < seq_of(
            api, "info:flight:claimed", ids[test])
        assert seq_of(api, "info:flight:landed", ids[test]) < seq_of(
            api, "info:flight:claimed", ids["publish"])
    graph = json.loads(fleet.gg("flights", "--graph", ids["build"], "--json", check=True).stdout)
    assert {n["id"]: n["stage"] for n in graph["nodes"]} == {i: "landed" for i in ids.values()}

    # a failed build cancels everything below it, each naming the build
    done, _ = fly_file(fleet, tmp_path, "broken.yaml", THREE_STAGES.format(build="exit 3"))
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert [n for n, _ in lines] == ["build", "test-1", "test-2", "test-3", "publish"]
    ids = dict(lines)
    assert ended(api, ids["build"], "failed")["stage"] == "failed"
    for name in ("test-1", "test-2", "test-3", "publish"):
        gone = ended(api, ids[name], "cancelled", "landed")
        assert (gone["stage"], gone["ended_reason"]) == (
            "cancelled", f"dependency {ids['build']} failed"), name
        assert not api.events(kind="info:flight:claimed", flight=ids[name], limit=10)


def test_a_graph_opened_on_one_replica_lands_in_order_through_a_runner_on_another(
        make_replicas):
    replicas = make_replicas(2)
    first, second = replicas.api(0), replicas.api(1)
    replicas.runner("r", first=0, only=True)
    wait_until(lambda: any(r["online"] for r in second.runners()), what="the runner online")
    opened = second.open_graph([
        {"name": "publish", "command": ["true"], "needs": ["build"]},
        {"name": "build", "command": ["true"]}])["flights"]
    ids = {f["name"]: f["id"] for f in opened}
    landed = wait_until(lambda: (lambda f: f if f["stage"] == "landed" else None)(
        first.flight(ids["publish"])), timeout=60, what="publish to land")
    assert landed["after"][0]["id"] == ids["build"]
    assert seq_of(first, "info:flight:landed", ids["build"]) < seq_of(
        first, "info:flight:claimed", ids["publish"])
