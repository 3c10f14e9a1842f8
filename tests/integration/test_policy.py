"""Policy travels down and is enforced for real: bubblewrap sandboxes, empty network
namespaces, degraded runners; and the sent log shows what left the machine."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from gg.launch import gg_argv
from gg.runner.capabilities import probe

from support import FAST, Fleet, wait_until

CAPS = probe()
needs_sandbox = pytest.mark.skipif(
    not (CAPS["bwrap_usable"] and CAPS["netns"]),
    reason=f"bubblewrap cannot make namespaces here ({CAPS['bwrap_error']})")


def _ended(api, flight_id):
    shown = api.flight(flight_id)
    return shown if shown["stage"] in ("landed", "failed", "cancelled") else None


def _fly(fleet, command: list[str], **extra) -> dict:
    api = fleet.api()
    flight = api.open_flight({"command": command, **extra})
    return wait_until(lambda: _ended(api, flight["id"]), timeout=40, what="the flight to end")


def test_a_raise_of_workers_takes_effect_at_the_next_start_without_a_host_flag(fleet):
    runner = fleet.runner("r1", workers=None)  # as a unit without --workers starts it
    fleet.wait_online("r1")
    assert fleet.runner_row("r1")["started_workers"] == 1
    raised = fleet.gg("runner", "policy", "r1", "--workers", "3")
    assert "workers raised to 3 needs a restart (started with 1)" in raised.stdout
    wait_until(lambda: (runner.state_dir / "policy.json").exists(),
               what="the runner to hear its new policy")
    runner.stop()
    fleet.runners.remove(runner)
    fleet.runner("r1", workers=None)
    wait_until(lambda: (fleet.runner_row("r1") or {}).get("started_workers") == 3,
               what="the restarted runner to start with its policy's workers")
    shown = fleet.gg("runner", "show", "r1", check=True).stdout
    assert "workers    3 (started with 3)" in shown


def _output(shown: dict) -> str:
    return "".join(f["body"]["text"] for f in shown["facts"] if f["kind"] == "output")


def _policy(fleet, name, *flags) -> None:
    done = fleet.gg("runner", "policy", name, *flags)
    assert done.returncode == 0, done.stderr
    wait_until(lambda: fleet.runner_row(name)["checks_verdict"] == "checks passed",
               what=f"{name} to check in under its new policy")


@pytest.fixture
def listener():
    """A TCP port listening on the host's loopback, answering every connection."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
           "    print('connected')\n"
           "except OSError as exc:\n"
           "    print('no connection:', exc); sys.exit(3)\n")


@needs_sandbox
def test_egress_none_cannot_reach_the_hosts_loopback_and_egress_all_can(fleet, listener):
    fleet.runner("r1")
    fleet.wait_online("r1")
    script = CONNECT.format(port=listener)
    _policy(fleet, "r1", "--isolation", "sandbox", "--egress", "none")
    cut = _fly(fleet, [sys.executable, "-c", script])
    assert cut["stage"] == "failed" and cut["exit_code"] == 3, _output(cut)
    assert "no connection" in _output(cut)
    _policy(fleet, "r1", "--egress", "all")
    reached = _fly(fleet, [sys.executable, "-c", script])
    assert reached["stage"] == "landed", _output(reached)
    assert _output(reached) == "connected\n"
    started = [f for f in reached["facts"] if f["kind"] == "started"][0]
    assert started["body"]["policy"]["egress"] == "all"


def _non_dev_fleet(tmp_path) -> Fleet:
    fleet = Fleet(tmp_path / "prod", dict(FAST))
    fleet.server.dev = False
    return fleet.start()


@needs_sandbox
def test_a_sandboxed_flight_cannot_write_etc_nor_see_the_runners_state_or_config(tmp_path):
    fleet = _non_dev_fleet(tmp_path)  # no --dev: every runner is sandboxed by default
    try:
        runner = fleet.runner("r1")
        fleet.wait_online("r1")
        row = fleet.runner_row("r1")
        assert row["policy"]["isolation"] == "sandbox" and row["health"] == "ok"
        state, config = runner.state_dir, fleet.config_dir
        probe_script = (
            "touch /etc/gg-sandbox-probe 2>/dev/null && echo etc=written || echo etc=refused\n"
            f"touch {state}/probe 2>/dev/null && echo state=written || echo state=refused\n"
            f"test -e {state}/key.pem && echo key=visible || echo key=hidden\n"
            f"test -e {state}/runner.json && echo registration=visible || echo registration=hidden\n"
            f"test -e {config}/config.json && echo config=visible || echo config=hidden\n"
            "echo hello > here && echo workspace=written\n"
            "echo tmp > /tmp/gg-probe && echo tmp=written\n"
        )
        shown = _fly(fleet, [probe_script])
        assert shown["stage"] == "landed", _output(shown)
        assert _output(shown).split() == ["etc=refused", "state=refused", "key=hidden",
                                          "registration=hidden", "config=hidden",
                                          "workspace=written", "tmp=written"]
        assert not os.path.exists("/etc/gg-sandbox-probe")
        assert not (state / "probe").exists() and not os.path.exists("/tmp/gg-probe")
    finally:
        fleet.stop()


def test_isolation_none_is_refused_on_a_server_without_dev(tmp_path):
    fleet = _non_dev_fleet(tmp_path)
    try:
        fleet.runner("r1")
        fleet.wait_online("r1")
        refused = fleet.gg("runner", "policy", "r1", "--isolation", "none")
        assert refused.returncode == 2
        assert refused.stderr.strip() == ("isolation none is allowed only on a control plane "
                                          "started with --dev; use sandbox or container")
        assert fleet.runner_row("r1")["policy"]["isolation"] == "sandbox"
    finally:
        fleet.stop()


def test_a_policy_the_runner_cannot_meet_makes_it_degraded_and_work_goes_to_another(
        fleet, tmp_path):
    bare = tmp_path / "bare"  # a PATH with no container engine on it
    bare.mkdir()
    fleet.runner("a", env={"PATH": str(bare)})
    fleet.runner("b")
    fleet.wait_online("a", "b")
    done = fleet.gg("runner", "policy", "a", "--isolation", "container")
    assert done.returncode == 0, done.stderr
    reason = "degraded: no container engine reachable"
    assert reason in done.stdout
    row = wait_until(lambda: (lambda r: r if r["checks_verdict"] == "1 check failed" else None)(
        fleet.runner_row("a")), what="a's next check-in to confirm")
    assert row["health"] == reason
    assert [c["name"] for c in row["checks"] if not c["passed"]] == ["container engine"]
    api = fleet.api()
    ids = [api.open_flight({"command": ["echo", str(i)]})["id"] for i in range(4)]
    for flight_id in ids:
        shown = wait_until(lambda: _ended(api, flight_id), what="each flight to land")
        assert shown["stage"] == "landed" and shown["runner_name"] == "b"
    shown = fleet.gg("runner", "show", "a")
    assert "✗ container engine" in shown.stdout and "1 check failed" in shown.stdout
    degraded = json.loads(fleet.gg("events", "--json", "--kind", "warn:runner:degraded").stdout)
    assert len(degraded) == 1 and degraded[0]["body"]["missing"] == "no container engine reachable"
    # A policy it can meet clears it at the next check-in, and it takes work again.
    fleet.gg("runner", "policy", "a", "--isolation", "none", check=True)
    wait_until(lambda: fleet.runner_row("a")["health"] == "ok", what="a healthy again")
    mine = api.open_flight({"command": ["/bin/echo", "mine"], "runner": "a"})
    assert wait_until(lambda: _ended(api, mine["id"]))["stage"] == "landed"


def test_lowering_workers_applies_at_once_and_raising_past_the_start_asks_for_a_restart(fleet, tmp_path):
    fleet.runner("r1", workers=2)
    fleet.wait_online("r1")
    _policy(fleet, "r1", "--workers", "1")
    api = fleet.api()
    release = tmp_path / "release"
    hold = f"while [ ! -e {release} ]; do sleep 0.1; done"
    first, second = (api.open_flight({"command": [hold]}) for _ in range(2))
    wait_until(lambda: api.flight(first["id"])["stage"] == "flying", what="one flight flying")
    wait_until(lambda: "busy" in (api.flight(second["id"])["waiting"] or ""),
               what="the second to wait for a free slot")
    release.touch()
    for flight in (first, second):
        wait_until(lambda: _ended(api, flight["id"]), what="both to land")
    raised = fleet.gg("runner", "policy", "r1", "--workers", "4")
    assert "workers raised to 4 needs a restart (started with 2)" in raised.stdout
    assert fleet.runner_row("r1")["health"] == "ok"


def test_gg_runner_sent_shows_each_check_in_and_never_a_token(fleet):
    runner = fleet.runner("r1")
    fleet.wait_online("r1")
    env = {**os.environ, "GG_STATE_DIR": str(runner.state_dir), "GG_CONFIG_DIR": str(fleet.config_dir)}

    def sent() -> list[dict]:
        done = subprocess.run(gg_argv("runner", "sent", "--json"), env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def beat(e: dict) -> bool:  # a full check-in, or a claim carrying the readings (heartbeat)
        return e["path"] == "/v1/runner/check-in" or (
            e["path"] == "/v1/runner/claim" and e["body"].get("readings") is not None)

    check_ins = wait_until(lambda: (lambda rows: rows if len(rows) >= 4 else None)(
        [e for e in sent() if beat(e)]), what="four check-ins logged")
    assert all(e["method"] == "POST" and e["at"] > 0 for e in check_ins)
    assert check_ins[0]["path"] == "/v1/runner/check-in"
    assert "capabilities" in check_ins[0]["body"]  # the first carries the capability report
    assert all("readings" in e["body"] for e in check_ins)
    last_seen = fleet.runner_row("r1")["last_seen_at"]  # what the server saw last was logged
    assert any(abs(e["at"] - last_seen) < 5.0 for e in sent() if beat(e))
    log = runner.state_dir / "sent.jsonl"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    credential = json.loads((runner.state_dir / "runner.json").read_text())["credential"]
    assert credential not in text and "ggr_" not in text and "ggp_" not in text
    # --follow prints new check-ins as they are sent.
    follower = subprocess.Popen(gg_argv("runner", "sent", "--follow"), env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(follower.stdout.readline, "")),
                     daemon=True).start()
    try:
        wait_until(lambda: sum("/v1/runner/claim" in x for x in lines) > 0,
                   what="followed heartbeats")
    finally:
        follower.kill()
        follower.wait()


def test_a_host_without_bubblewrap_reads_degraded_and_gets_no_work(tmp_path):
    fleet = _non_dev_fleet(tmp_path)  # sandbox by default
    try:
        empty = tmp_path / "empty-path"
        empty.mkdir()
        fleet.runner("bare", env={"PATH": str(empty)})  # probes find no bwrap here
        fleet.wait_online("bare")
        row = fleet.runner_row("bare")
        assert row["health"] == "degraded: bubblewrap not installed"
        assert row["checks_verdict"] == "2 checks failed"  # installed, and so namespaces
        api = fleet.api()
        flight = api.open_flight({"command": ["true"]})
        assert api.flight(flight["id"])["waiting"] == "waiting: every runner is degraded"
        degraded = json.loads(fleet.gg("events", "--json", "--kind", "warn:runner:degraded").stdout)
        assert [e["body"]["missing"] for e in degraded] == ["bubblewrap not installed"]
    finally:
        fleet.stop()


def test_a_flight_the_runner_cannot_isolate_is_handed_back_before_anything_runs(fleet, tmp_path):
    """The race the server cannot see (policy tightened between check-in and grant, or the
    host lost bubblewrap): the real flight code refuses to run it with less isolation."""
    from gg import keys
    from gg.client import Client
    from gg.runner.flight import FlightRun, Lease

    api = fleet.api()
    credential = api.register({"name": "r1"}, keys.load_or_create(tmp_path / "key.pem"))["credential"]
    runner_api = Client(fleet.url, credential)
    runner_api.check_in({"free_slots": 1})
    marker = tmp_path / "ran"
    flight = api.open_flight({"command": [f"touch {marker}"]})
    grant = runner_api.claim(1, 5)
    assert grant.flight.id == flight["id"]
    unmet: list[str] = []
    run = FlightRun(client=runner_api, flight=grant.flight, say=lambda line: None,
                    lease=Lease(flight["id"], grant.lease.epoch, 3.0, 2.0,
                                time.monotonic() + 3.0),
                    workspace_root=tmp_path / "ws", state_dir=tmp_path / "state",
                    policy={"isolation": "sandbox", "egress": "none", "workers": 1},
                    capabilities={"bwrap": None, "bwrap_usable": False, "netns": False},
                    on_unmet=unmet.append)
    assert run.run() == "returned"
    assert unmet == ["bubblewrap not installed"]
    assert not marker.exists()
    shown = api.flight(flight["id"])
    assert shown["stage"] == "ready"
    assert [f["kind"] for f in shown["facts"]] == ["returned"]  # no "started": nothing ran
    assert shown["facts"][0]["body"]["reason"] == ("this runner cannot meet its policy: "
                                                   "bubblewrap not installed")
