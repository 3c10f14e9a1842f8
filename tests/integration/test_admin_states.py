"""Admin states and liveness with a real control plane and real runner processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import httpx

from gg.launch import gg_argv

from support import new_key, wait_until

RETIRED_SENTENCE = "this runner was retired by an admin; it exits and will not come back"


def _stage(api, flight_id, *stages):
    shown = api.flight(flight_id)
    return shown if shown["stage"] in stages else None


def _events(fleet, kind, runner=None):
    args = ["events", "--json", "--kind", kind] + (["--runner", runner] if runner else [])
    done = fleet.gg(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _checked_in_since(fleet, name, since, times=2):
    """The runner checked in at least ``times`` check-in intervals after ``since``."""
    row = fleet.runner_row(name)
    return row is not None and row["last_seen_at"] >= since + times * 0.5


def test_cordon_keeps_new_work_away_and_resume_releases_it_at_once(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    done = fleet.gg("runner", "cordon", "r1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "r1: active -> cordoned"
    cordoned_at = time.time()
    flight = api.open_flight({"command": ["echo taken"]})
    # The runner keeps checking in and claiming; the flight is still kept away from it.
    wait_until(lambda: _checked_in_since(fleet, "r1", cordoned_at), what="two more check-ins")
    shown = api.flight(flight["id"])
    assert shown["stage"] == "ready"
    assert shown["waiting"] == "waiting: every runner is cordoned"
    assert fleet.runner_row("r1")["state"] == "cordoned"
    assert fleet.gg("runner", "resume", "r1").stdout.strip() == "r1: cordoned -> active"
    wait_until(lambda: _stage(api, flight["id"], "landed"), timeout=15, what="the flight to land")
    changes = _events(fleet, "info:runner:drain_changed", "r1")
    assert [(e["body"]["from"], e["body"]["state"], e["actor"]) for e in changes] == [
        ("active", "cordoned", "owner"), ("cordoned", "active", "owner")]


def test_drain_with_work_in_flight_goes_draining_then_drained_by_itself(fleet, tmp_path):
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    release = tmp_path / "release"
    busy = api.open_flight({"command": [f"while [ ! -e {release} ]; do sleep 0.1; done; echo done"]})
    wait_until(lambda: _stage(api, busy["id"], "flying"), what="the first flight to fly")
    drained = fleet.gg("runner", "drain", "r1")
    assert drained.returncode == 0, drained.stderr
    assert "active -> draining" in drained.stdout
    assert fleet.runner_row("r1")["state"] == "draining"
    second = api.open_flight({"command": ["echo second"]})
    wait_until(lambda: "draining" in (api.flight(second["id"])["waiting"] or ""),
               what="the second flight to wait for a draining runner")
    release.touch()
    wait_until(lambda: _stage(api, busy["id"], "landed"), what="the first flight to land")
    wait_until(lambda: fleet.runner_row("r1")["state"] == "drained", what="drained by itself")
    assert api.flight(second["id"])["stage"] == "ready"
    changes = _events(fleet, "info:runner:drain_changed", "r1")
    assert [(e["body"]["state"], e["actor"]) for e in changes] == [
        ("draining", "owner"), ("drained", "control-plane")]
    fleet.gg("runner", "resume", "r1", check=True)
    wait_until(lambda: _stage(api, second["id"], "landed"), what="the second flight after resume")


def test_drain_by_label_drains_every_runner_advertising_it(fleet):
    fleet.runner("ui-1", labels="environment=ui")
    fleet.runner("ui-2", labels="environment=ui")
    fleet.runner("api-1", labels="environment=api")
    fleet.wait_online("ui-1", "ui-2", "api-1")
    done = fleet.gg("runner", "drain", "--label", "environment=ui", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(c["name"] for c in json.loads(done.stdout)) == ["ui-1", "ui-2"]
    states = {r["name"]: r["state"] for r in fleet.api().runners()}
    assert states == {"ui-1": "drained", "ui-2": "drained", "api-1": "active"}
    none = fleet.gg("runner", "drain", "--label", "environment=db")
    assert none.returncode == 5 and none.stderr.strip() == "no runner advertises environment=db"


def test_retire_stops_the_runner_with_one_sentence_and_refuses_its_credential(make_fleet):
    # A long check-in interval: only the claim path can make the runner exit promptly.
    fleet = make_fleet({"GG_CHECK_IN_INTERVAL": "60", "GG_OFFLINE_AFTER": "180"})
    runner = fleet.runner("r1")
    fleet.wait_online("r1")
    runner_id = fleet.runner_row("r1")["id"]
    wait_until(lambda: "/v1/runner/claim" in (runner.state_dir / "sent.jsonl").read_text(),
               what="the runner to park a claim")
    retired_at = time.monotonic()
    done = fleet.gg("runner", "retire", "r1", "--yes")
    assert done.returncode == 0, done.stderr
    assert "is retired" in done.stdout
    code = runner.proc.wait(timeout=30)
    assert time.monotonic() - retired_at < 20, "the parked claim must be released at once"
    assert code == 1
    assert RETIRED_SENTENCE in fleet.log("r1")
    credential = json.loads((runner.state_dir / "runner.json").read_text())["credential"]
    refused = httpx.post(fleet.url + "/v1/runner/check-in", json={},
                         headers={"authorization": f"Bearer {credential}"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "runner_retired"
    assert fleet.runner_row("r1") is None  # out of gg runners
    retired = _events(fleet, "info:runner:retired", runner_id)  # history kept, by id
    assert len(retired) == 1 and retired[0]["actor"] == "owner"
    # Its key is tombstoned: the same machine cannot register again.
    (runner.state_dir / "runner.json").unlink()
    again = fleet.runner("r1")
    assert again.proc.wait(timeout=30) != 0
    assert "can never register again" in fleet.log("r1")


def test_forget_is_refused_while_the_runner_is_online_naming_why(fleet):
    runner = fleet.runner("r1")
    fleet.wait_online("r1")
    runner_id = fleet.runner_row("r1")["id"]
    refused = fleet.gg("runner", "forget", "r1", "--yes")
    assert refused.returncode == 6
    assert refused.stderr.startswith("runner r1 is online")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert runner.stop() == 0  # a graceful stop says goodbye: offline at once
    wait_until(lambda: not fleet.runner_row("r1")["online"], what="r1 offline after goodbye")
    done = fleet.gg("runner", "forget", "r1", "--yes")
    assert done.returncode == 0, done.stderr
    assert fleet.runner_row("r1") is None
    forgotten = _events(fleet, "info:runner:forgotten", runner_id)
    assert len(forgotten) == 1 and forgotten[0]["actor"] == "owner"
    goodbye = _events(fleet, "info:runner:goodbye", runner_id)
    assert len(goodbye) == 1 and goodbye[0]["actor"] == "runner:r1"


def test_a_sigkilled_runner_ages_out_exactly_once(fleet):
    runner = fleet.runner("r1")
    fleet.wait_online("r1")
    os.killpg(runner.proc.pid, signal.SIGKILL)
    runner.proc.wait()
    # Nobody else checks in: the control plane's own liveness watch records the episode.
    aged = wait_until(lambda: _events(fleet, "warn:runner:aged_out"), timeout=30,
                      what="warn:runner:aged_out")
    assert aged[0]["actor"] == "control-plane"
    # Look again and again for a while (listing runners evaluates liveness too).
    until = time.monotonic() + 3
    while time.monotonic() < until:
        assert fleet.runner_row("r1")["online"] is False
    assert len(_events(fleet, "warn:runner:aged_out")) == 1
    assert _events(fleet, "info:runner:goodbye") == []


def test_events_follow_prints_an_admin_change_as_it_happens(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    env = {**os.environ, **fleet.env, "GG_CONFIG_DIR": str(fleet.config_dir), "GG_SERVER": fleet.url}
    follower = subprocess.Popen(gg_argv("events", "--follow", "--json", "--kind", "info:runner:"),
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, start_new_session=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(follower.stdout.readline, "")),
                     daemon=True).start()
    try:
        wait_until(lambda: any("info:runner:registered" in line for line in lines),
                   what="the follower to print the past")
        fleet.gg("runner", "cordon", "r1", check=True)
        line = wait_until(lambda: next((x for x in lines if "drain_changed" in x), None),
                          what="the follower to print the cordon")
        event = json.loads(line)
        assert event["actor"] == "owner" and event["body"]["state"] == "cordoned"
        assert event["at"] > 0
    finally:
        follower.kill()
        follower.wait()


def test_version_skew_is_recorded_once_per_version_pair(fleet):
    credential = fleet.api().register({"name": "old"}, new_key())["credential"]
    headers = {"authorization": f"Bearer {credential}"}
    server = httpx.get(fleet.url + "/v1/health").json()
    built = {"gg_commit": server["commit"]}
    for version in ("0.0.1", "0.0.1", "0.0.1", "0.0.2"):
        r = httpx.post(fleet.url + "/v1/runner/check-in",
                       json={"version": version, "inventory": built}, headers=headers)
        assert r.status_code == 200, r.text
    assert fleet.runner_row("old")["version_skew"] == "skewed"
    skew = _events(fleet, "warn:runner:version_skew")
    assert [e["body"]["runner_version"] for e in skew] == ["0.0.1", "0.0.2"]
    httpx.post(fleet.url + "/v1/runner/check-in", json={"version": server["version"]},
               headers=headers).raise_for_status()
    assert fleet.runner_row("old")["version_skew"] == "none"
    for _ in range(2):  # a build that does not know its commit: unknown, warned once
        httpx.post(fleet.url + "/v1/runner/check-in",
                   json={"version": server["version"], "inventory": {"gg_commit": "unknown"}},
                   headers=headers).raise_for_status()
    assert fleet.runner_row("old")["version_skew"] == "unknown"
    skew = _events(fleet, "warn:runner:version_skew")
    assert [(e["body"]["runner_version"], e["body"]["skew"]) for e in skew] == [
        ("0.0.1", "skewed"), ("0.0.2", "skewed"), (server["version"], "unknown")]


def test_bad_input_is_one_sentence_on_stderr_and_a_non_zero_exit(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    cases = [
        (("runner", "cordon", "ghost"), 5, "no runner ghost"),
        (("runner", "retire", "ghost", "--yes"), 5, "no runner ghost"),
        (("runner", "policy", "r1", "--isolation", "bogus"), 2,
         "--isolation must be one of none, sandbox, container, gvisor (got 'bogus')"),
        (("runner", "policy", "r1", "--egress", "some"), 2, "--egress must be one of"),
        (("runner", "drain", "--label", "Not A Label"), 2, "--label: the label"),
        (("runner", "drain"), 2, "name one runner, or select runners with --label"),
        (("runner", "drain", "r1", "--label", "a=b"), 2, "not both"),
    ]
    for args, code, words in cases:
        done = fleet.gg(*args)
        assert done.returncode == code, (args, done.returncode, done.stderr)
        assert words in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert fleet.runner_row("r1")["state"] == "active"  # nothing changed
