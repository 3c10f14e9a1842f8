"""Pull-mode runners across real processes: attached, polled, flying, fenced."""

from __future__ import annotations

import json
import sys

import pytest

from pull_support import PullRunner, netns_available
from support import wait_until


@pytest.fixture
def pulled(fleet, tmp_path):
    made = []

    def make(name: str, **kw) -> PullRunner:
        runner = PullRunner(tmp_path, name, fleet.env, **kw)
        made.append(runner)
        wait_until(runner.fingerprint, what=f"{name} to listen")
        return runner

    yield make
    for runner in made:
        runner.stop()


def _attach(fleet, runner: PullRunner, *extra: str):
    return fleet.gg("runner", "attach", runner.url, "--name", runner.name, *extra)


def _landed(fleet, flight_id):
    def landed():
        data = fleet.api().flight(flight_id)
        return data if data["stage"] == "landed" else None
    return landed


def test_an_attached_pull_runner_lands_a_flight(fleet, pulled):
    runner = pulled("p1")
    attached = _attach(fleet, runner, "--fingerprint", runner.fingerprint())
    assert attached.returncode == 0, attached.stderr
    assert runner.fingerprint() in attached.stdout
    row = fleet.wait_online("p1")["p1"]
    assert row["mode"] == "pull" and row["url"] == runner.url
    flight_id = fleet.api().open_flight({"command": ["echo", "pulled"]})["id"]
    data = wait_until(_landed(fleet, flight_id), what="the flight to land")
    output = "".join(f["body"]["text"] for f in data["facts"] if f["kind"] == "output")
    assert output == "pulled\n"
    assert data["attempts"][0]["runner_name"] == "p1"
    sent = [json.loads(line) for line in
            (runner.state_dir / "sent.jsonl").read_text().splitlines()]
    assert {(e["method"], e["path"]) for e in sent} >= {("ANSWER", "/v1/pull/poll"),
                                                       ("ANSWER", "/v1/pull/deliver")}
    shown = fleet.gg("runner", "show", "p1")
    assert f"mode       pull, polled at {runner.url}" in shown.stdout
    assert " pull " in fleet.gg("runners").stdout
    runner.stop()  # a graceful stop: its goodbye leaves with the last poll
    assert runner.proc.returncode == 0
    assert fleet.api().events(kind="info:runner:goodbye", runner=row["id"])
    assert fleet.runner_row("p1")["online"] is False


# -- signed both ways -------------------------------------------------------------------------


def _control_key(fleet):
    """The control plane's private key, read from its store (the test stands in for a thief
    of nothing: it needs a correctly signed request to replay)."""
    import sqlite3

    from gg import keys

    db = sqlite3.connect(fleet.server.data_dir / "gg.sqlite3")
    try:
        (pem,) = db.execute("SELECT private_pem FROM control_key").fetchone()
    finally:
        db.close()
    return keys.from_pem(pem)


def _signed(key, method: str, path: str, body: bytes, *, meant_for: str,
            stamp: float | None = None, nonce: str | None = None) -> dict:
    import time

    from gg import keys
    from gg.domain import pull as rules

    stamp_text = f"{time.time() if stamp is None else stamp:.3f}"
    nonce = nonce or rules.new_nonce()
    return {rules.TIMESTAMP_HEADER: stamp_text, rules.NONCE_HEADER: nonce,
            rules.SIGNATURE_HEADER: keys.sign(
                key, rules.request_message(meant_for, method, path, stamp_text, nonce, body)),
            "content-type": "application/json"}


def _post(runner: PullRunner, path: str, body: bytes, headers: dict):
    import httpx

    return httpx.post(runner.url + path, content=body, headers=headers, timeout=10,
                      trust_env=False)


def _answer_signed_by(runner_key: str, response, nonce: str) -> bool:
    from gg import keys
    from gg.domain import pull as rules

    message = rules.answer_message(response.status_code, nonce,
                                   response.headers[rules.TIMESTAMP_HEADER], response.content)
    return keys.verify(runner_key, message, response.headers[rules.SIGNATURE_HEADER])


def test_unsigned_wrongly_signed_stale_and_replayed_requests_are_refused_and_change_nothing(
        fleet, pulled):
    from gg import keys
    from gg.domain import pull as rules

    runner = pulled("p1")
    assert _attach(fleet, runner).returncode == 0
    runner_row = fleet.wait_online("p1")["p1"]
    runner_key = fleet.api().runner("p1")["public_key_fingerprint"]
    assert runner_key == runner.fingerprint()
    import httpx

    public_key = httpx.get(runner.url + rules.KEY_PATH, trust_env=False).json()["public_key"]
    poll = json.dumps({"runner": runner_row["id"], "name": "p1"}).encode()

    unsigned = _post(runner, rules.POLL_PATH, poll, {"content-type": "application/json"})
    assert unsigned.status_code == 401
    assert unsigned.json()["error"]["message"] == "the request is not signed"

    # Another key tries to take the runner over: re-pin its own key, retire the runner.
    thief = keys.generate()
    repin = json.dumps({"control_key": keys.public_text(thief), "name": "p1"}).encode()
    wrong = _post(runner, rules.ATTACH_PATH, repin,
                  _signed(thief, "POST", rules.ATTACH_PATH, repin,
                          meant_for=runner.fingerprint()))
    assert wrong.status_code == 401
    retire = json.dumps({"runner": runner_row["id"], "checked_in": {},
                         "retired": True}).encode()
    headers = _signed(thief, "POST", rules.DELIVER_PATH, retire,
                      meant_for=runner.fingerprint())
    wrong = _post(runner, rules.DELIVER_PATH, retire, headers)
    assert wrong.status_code == 401
    assert "not signed by the control plane's key" in wrong.json()["error"]["message"]

    # Even a refusal is answered signed by the runner's key, over the request's nonce.
    assert _answer_signed_by(public_key, wrong, headers[rules.NONCE_HEADER])
    assert not _answer_signed_by(keys.public_text(thief), wrong, headers[rules.NONCE_HEADER])

    control = _control_key(fleet)
    headers = _signed(control, "POST", rules.POLL_PATH, poll, meant_for=runner.fingerprint())
    first = _post(runner, rules.POLL_PATH, poll, headers)
    assert first.status_code == 200
    replayed = _post(runner, rules.POLL_PATH, poll, headers)
    assert replayed.status_code == 401
    assert replayed.json()["error"]["message"] == "the request was replayed"
    stale = _post(runner, rules.POLL_PATH, poll,
                  _signed(control, "POST", rules.POLL_PATH, poll, stamp=1_000_000.0,
                          meant_for=runner.fingerprint()))
    assert stale.status_code == 401

    # Nothing changed: the real control plane still reaches it and it still flies.
    flight_id = fleet.api().open_flight({"command": ["echo", "still mine"]})["id"]
    data = wait_until(_landed(fleet, flight_id), what="the flight to land")
    assert data["attempts"][0]["runner_name"] == "p1"
    assert "retired" not in runner.output()


class RecordingProxy:
    """An HTTP proxy on loopback in front of one pull runner that keeps every request the
    control plane sends through it: what someone on the path would capture."""

    def __init__(self, target: str):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import httpx

        self.seen: list[tuple[str, str, dict, bytes]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "connection")}
                proxy.seen.append((method, self.path, headers, body))
                answer = httpx.request(method, target + self.path, content=body,
                                       headers=headers, trust_env=False, timeout=10)
                self.send_response(answer.status_code)
                for k, v in answer.headers.items():
                    if k.lower() not in ("content-length", "connection", "transfer-encoding",
                                         "date", "server"):
                        self.send_header(k, v)
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def do_GET(self) -> None:  # noqa: N802
                self._relay("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._relay("POST")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_deliver_signed_for_one_runner_and_replayed_to_another_is_refused(fleet, pulled):
    """Both runners pin the same control plane key. A deliver the control plane signed for
    p1, captured on the path and replayed to p2 within the skew, with a nonce p2 never saw,
    is refused by p2 and runs nothing there."""
    import httpx

    from gg.domain import pull as rules

    p1, p2 = pulled("p1"), pulled("p2")
    proxy = RecordingProxy(p1.url)
    try:
        attached = fleet.gg("runner", "attach", proxy.url, "--name", "p1")
        assert attached.returncode == 0, attached.stderr
        assert _attach(fleet, p2).returncode == 0
        fleet.wait_online("p1", "p2")
        method, path, headers, body = wait_until(
            lambda: next((seen for seen in reversed(proxy.seen)
                          if seen[1] == rules.DELIVER_PATH), None),
            what="a deliver to p1 captured")
    finally:
        proxy.close()
    replayed = httpx.post(p2.url + path, content=body, headers=headers, trust_env=False,
                          timeout=10)
    assert replayed.status_code == 401
    assert "for this runner" in replayed.json()["error"]["message"]
    assert "polled as runner p1" not in p2.output()


def test_attach_refuses_a_fingerprint_mismatch_an_unreachable_runner_and_a_member(fleet, pulled):
    runner = pulled("p1")
    wrong = "SHA256:" + "A" * 43
    refused = _attach(fleet, runner, "--fingerprint", wrong)
    assert refused.returncode != 0
    assert "not attached" in refused.stderr and runner.fingerprint() in refused.stderr
    assert "Traceback" not in refused.stderr
    assert fleet.runner_row("p1") is None
    assert not (runner.state_dir / "control-plane.pub").exists()  # nothing pinned either
    from gg.launch import free_port

    nobody = fleet.gg("runner", "attach", f"http://127.0.0.1:{free_port()}", "--name", "p2")
    assert nobody.returncode != 0 and "could not be reached" in nobody.stderr
    assert "Traceback" not in nobody.stderr and fleet.runner_row("p2") is None
    member = fleet.api().add_person("ada", False)["token"]
    refused = fleet.gg("runner", "attach", runner.url, "--name", "p1", token=member)
    assert refused.returncode != 0 and "only an admin" in refused.stderr


# -- a runner that cannot dial out ------------------------------------------------------------


def test_a_runner_that_cannot_dial_out_takes_renews_and_lands_flights(fleet, pulled, tmp_path):
    """The runner lives in a network namespace of its own (only ``lo``); the one way in is
    its listening port, forwarded from the host through a Unix socket. It proves it cannot
    reach the control plane, then takes a flight that outlives several leases (renewed by the
    control plane's polls) and lands it, and lands a second one after."""
    why = netns_available()
    if why is not None:
        pytest.skip(why)
    runner = pulled("p1", netns=True)
    probe = runner.in_namespace(
        sys.executable, "-c",
        "import socket,sys\n"
        "print([n for _, n in socket.if_nameindex()])\n"
        f"try:\n socket.create_connection(('127.0.0.1', {fleet.server.port}), timeout=5)\n"
        "except OSError as e:\n print('refused', type(e).__name__)\n"
        "else:\n print('connected')\n")
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines() == ["['lo']", "refused ConnectionRefusedError"]
    attached = _attach(fleet, runner, "--fingerprint", runner.fingerprint())
    assert attached.returncode == 0, attached.stderr
    fleet.wait_online("p1")
    lease_ttl = float(fleet.env["GG_LEASE_TTL"])
    api = fleet.api()
    flight_id = api.open_flight({"command": ["sh", "-c",
                                             f"sleep {3 * lease_ttl:g}; echo outlived"]})["id"]
    data = wait_until(_landed(fleet, flight_id), timeout=60, what="the long flight to land")
    assert len(data["attempts"]) == 1 and data["attempts"][0]["runner_name"] == "p1"
    output = "".join(f["body"]["text"] for f in data["facts"] if f["kind"] == "output")
    assert output == "outlived\n"
    second = api.open_flight({"command": ["echo", "again"]})["id"]
    again = wait_until(_landed(fleet, second), what="the second flight to land")
    assert again["attempts"][0]["runner_name"] == "p1"
    assert runner.proc.poll() is None  # still running, still unable to dial out


def test_a_killed_pull_runners_flight_expires_and_another_runner_lands_it(fleet, pulled,
                                                                           tmp_path):
    runner = pulled("p1")
    assert _attach(fleet, runner).returncode == 0
    fleet.wait_online("p1")
    marker = tmp_path / "first-attempt"
    api = fleet.api()
    flight_id = api.open_flight({"command": ["sh", "-c",
                                             f"if [ -e {marker} ]; then echo second; "
                                             f"else touch {marker}; sleep 600; fi"]})["id"]
    wait_until(lambda: api.flight(flight_id)["stage"] == "flying" and marker.exists(),
               what="p1 to fly it")
    assert api.flight(flight_id)["attempts"][0]["runner_name"] == "p1"
    runner.kill()
    fleet.runner("r2")
    data = wait_until(_landed(fleet, flight_id), timeout=60, what="r2 to land it")
    attempts = data["attempts"]
    assert [a["runner_name"] for a in attempts] == ["p1", "r2"]
    assert data["epoch"] == 2
    output = "".join(f["body"]["text"] for f in data["facts"] if f["kind"] == "output")
    assert output == "second\n"
    assert api.events(kind="info:flight:expired")


def test_bad_listen_addresses_and_flags_are_one_sentence(tmp_path):
    import os
    import subprocess

    from gg.launch import gg_argv

    env = {**os.environ, "GG_STATE_DIR": str(tmp_path / "state"),
           "GG_CONFIG_DIR": str(tmp_path / "config")}
    for args, said, extra in (
            (["--listen", "nowhere"], "--listen takes HOST:PORT", {}),
            (["--listen", "127.0.0.1:7400", "--once"], "never enrolled", {}),
            (["--listen", "127.0.0.1:7400"], "GG_MAX_PARKED_CLAIMS: '-5' is below 0",
             {"GG_MAX_PARKED_CLAIMS": "-5"}),
            (["--listen", "127.0.0.1:7400"], "GG_LISTEN_BACKLOG: 'abc' is not a whole number",
             {"GG_LISTEN_BACKLOG": "abc"})):
        done = subprocess.run(gg_argv("runner", "up", *args), env={**env, **extra},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0
        assert said in done.stderr and "Traceback" not in done.stderr
        assert "unexpectedly" not in done.stderr  # the operator's mistake, not gg's crash
        assert len(done.stderr.strip().splitlines()) == 1


def test_a_retired_pull_runner_stops_its_flight_hands_it_back_and_exits(fleet, pulled):
    runner = pulled("p1")
    assert _attach(fleet, runner).returncode == 0
    fleet.wait_online("p1")
    api = fleet.api()
    flight_id = api.open_flight({"command": ["sleep", "600"]})["id"]
    wait_until(lambda: api.flight(flight_id)["stage"] == "flying", what="p1 to fly it")
    retired = fleet.gg("runner", "retire", "p1", "--yes")
    assert retired.returncode == 0, retired.stderr
    wait_until(lambda: runner.proc.poll() is not None, timeout=30, what="p1 to exit")
    assert runner.proc.returncode == 1
    assert "retired by an admin" in runner.output()
    data = api.flight(flight_id)
    assert data["stage"] == "ready" and data["epoch"] == 1  # handed back, not expired
    assert not api.events(kind="info:flight:expired")


def test_a_cancelled_flight_is_stopped_on_the_pull_runner_at_its_next_poll(fleet, pulled,
                                                                          tmp_path):
    runner = pulled("p1")
    assert _attach(fleet, runner).returncode == 0
    fleet.wait_online("p1")
    api = fleet.api()
    pid_file = tmp_path / "pid"
    flight_id = api.open_flight({"command": ["sh", "-c",
                                             f"echo $$ > {pid_file}; exec sleep 600"]})["id"]
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(),
               what="the flight's process")
    pid = int(pid_file.read_text())
    assert fleet.gg("cancel", flight_id).returncode == 0
    from support import gone

    wait_until(lambda: gone(pid), timeout=30, what="its process to be stopped")
    assert api.flight(flight_id)["stage"] == "cancelled"
    second = api.open_flight({"command": ["echo", "next"]})["id"]
    wait_until(_landed(fleet, second), what="the next flight to land on p1")


def test_a_runner_pinned_by_one_control_plane_refuses_another(make_fleet, tmp_path):
    ours, theirs = make_fleet(), make_fleet()
    runner = PullRunner(tmp_path, "p1", ours.env)
    try:
        wait_until(runner.fingerprint, what="p1 to listen")
        assert _attach(ours, runner).returncode == 0
        taken = _attach(theirs, runner)
        assert taken.returncode != 0
        assert "not signed by the control plane's key this runner pinned" in taken.stderr
        assert theirs.runner_row("p1") is None
        flight_id = ours.api().open_flight({"command": ["echo", "ours"]})["id"]
        wait_until(_landed(ours, flight_id), what="the flight to land")
    finally:
        runner.stop()


def test_a_pull_runner_advertises_its_labels_and_a_console_to_it_is_refused_at_once(fleet,
                                                                                    pulled):
    runner = pulled("p1", labels="zone=dmz")
    assert _attach(fleet, runner, "--fingerprint", runner.fingerprint()).returncode == 0
    fleet.wait_online("p1")
    wait_until(lambda: fleet.runner_row("p1")["labels"] == {"zone": "dmz"},
               what="the pull runner's stated labels")
    flight_id = fleet.api().open_flight({"command": ["true"], "labels": {"zone": "dmz"}})["id"]
    wait_until(_landed(fleet, flight_id), what="the dmz flight to land on p1")
    refused = fleet.gg("console", "p1", "--", "true", timeout=30)
    assert refused.returncode != 0
    assert "is a pull-mode runner: it never dials out" in refused.stderr
