"""Hooks across real processes: a real ``gg server`` and ``gg runner up``, and a receiver
on loopback that is the test's own (it records every request it gets)."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psutil
import pytest

from gg.client import ApiError, Client
from gg.launch import free_port

from support import wait_until

# Retries in a fraction of a second, so a test waits for them only briefly.
QUICK = {"GG_HOOK_BACKOFF": "0.05", "GG_HOOK_BACKOFF_CAP": "0.3", "GG_HOOK_POLL": "0.2"}


class Receiver:
    """An HTTP server on loopback that records each request (path, headers, body) and
    answers the status ``answer(path, n)`` says for the n-th request to that path."""

    def __init__(self, port: int | None = None, answer=None):
        self.port = port or free_port()
        self.answer = answer or (lambda path, n: 200)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.httpd = None

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver.lock:
                    n = sum(1 for r in receiver.requests if r["path"] == self.path) + 1
                    status = receiver.answer(self.path, n)
                    receiver.requests.append({"path": self.path, "headers": dict(self.headers),
                                              "body": body, "status": status})
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    def got(self, path: str = "/hook") -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["path"] == path]


class Unending:
    """A receiver on loopback that reads each request and then answers in one of three
    ways: ``flood`` (200, then bytes as fast as loopback takes them, without end),
    ``trickle`` (200, then a byte every 50 ms, without end) or ``hang`` (nothing at all)
    until :meth:`stop`. It counts the requests it read and the bytes it sent."""

    FLOOD = b"x" * 65536

    def __init__(self, mode: str):
        self.mode = mode
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.requests: list[bytes] = []
        self.sent = 0

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> "Unending":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                body = self._read_request(conn)
                with self.lock:
                    self.requests.append(body)
                if self.mode == "hang":
                    self.stopping.wait()
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                             b"connection: close\r\n\r\n")
                chunk = self.FLOOD if self.mode == "flood" else b"x"
                while not self.stopping.is_set():
                    conn.sendall(chunk)
                    with self.lock:
                        self.sent += len(chunk)
                    if self.mode == "trickle":
                        self.stopping.wait(0.05)
            except OSError:  # the server hung up: this attempt is over
                return

    @staticmethod
    def _read_request(conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                raise OSError("closed before the request's headers ended")
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            more = conn.recv(65536)
            if not more:
                break
            body += more
        return body

    def got(self) -> list[bytes]:
        with self.lock:
            return list(self.requests)

    def stop(self) -> None:
        self.stopping.set()
        self.server.close()


@pytest.fixture
def unending():
    made = []

    def make(mode: str) -> Unending:
        made.append(Unending(mode).start())
        return made[-1]

    yield make
    for r in made:
        r.stop()


@pytest.fixture
def receivers():
    made = []

    def make(**kw) -> Receiver:
        made.append(Receiver(**kw))
        return made[-1]

    yield make
    for r in made:
        r.stop()


def signed_by(secret: str, request: dict) -> bool:
    want = "sha256=" + hmac.new(secret.encode(), request["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, request["headers"]["X-GG-Signature"])


def add_hook(fleet, url: str, on: str, *extra: str) -> tuple[str, str]:
    added = fleet.gg("hook", "add", url, "--on", on, *extra, "--json")
    assert added.returncode == 0, added.stderr
    answer = json.loads(added.stdout)
    return answer["hook"]["id"], answer["secret"]


def landed(api, flight_id: str) -> bool:
    return api.flight(flight_id)["stage"] == "landed"


def test_a_landed_flight_is_posted_signed_retried_after_a_500_shown_and_stops_on_remove(
        make_fleet, receivers):
    receiver = receivers(answer=lambda path, n: 500 if path == "/a" and n == 1 else 200).start()
    fleet = make_fleet(QUICK)
    hook_a, secret_a = add_hook(fleet, receiver.url("/a"), "landed,failed")
    hook_b, secret_b = add_hook(fleet, receiver.url("/b"), "landed")
    assert secret_a.startswith("ggh_") and secret_a != secret_b
    listed = json.loads(fleet.gg("hooks", "--json").stdout)
    assert [h["id"] for h in listed] == [hook_a, hook_b]
    assert "secret" not in json.dumps(listed) and secret_a not in json.dumps(listed)

    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    first = api.open_flight({"command": ["echo", "hi"]})["id"]
    wait_until(lambda: landed(api, first), what="the flight to land")

    # The first attempt is answered 500; the same delivery is tried again and delivered.
    tries = wait_until(lambda: (lambda g: g if len(g) >= 2 else None)(receiver.got("/a")),
                       what="a retry after the 500")
    assert [t["status"] for t in tries] == [500, 200]
    assert tries[0]["body"] == tries[1]["body"]
    assert all(signed_by(secret_a, t) and not signed_by(secret_b, t) for t in tries)
    event = json.loads(tries[0]["body"])
    assert event["event"] == "landed" and event["kind"] == "info:flight:landed"
    assert event["flight_id"] == first and event["hook"] == hook_a
    assert tries[0]["headers"]["X-GG-Delivery"] == tries[1]["headers"]["X-GG-Delivery"] \
        == event["delivery"]
    assert tries[0]["headers"]["X-GG-Event"] == "landed"
    got_b = wait_until(lambda: receiver.got("/b"), what="the second hook's delivery")
    assert signed_by(secret_b, got_b[0]) and json.loads(got_b[0]["body"])["hook"] == hook_b

    def shown():
        detail = json.loads(fleet.gg("hook", "show", hook_a, "--json").stdout)
        delivered = [d for d in detail["deliveries"] if d["delivered_at"] is not None]
        return detail if delivered else None

    detail = wait_until(shown, what="gg hook show to list the delivery")
    [delivery] = detail["deliveries"]
    assert delivery["id"] == event["delivery"] and delivery["event"] == "landed"
    assert delivery["flight_id"] == first and delivery["attempts"] == 2
    assert [(a["attempt"], a["status"]) for a in delivery["answers"]] == [(1, 500), (2, 200)]
    table = fleet.gg("hook", "show", hook_a)
    assert table.returncode == 0
    assert event["delivery"][:12] in table.stdout and "500" in table.stdout

    # Removed: the next flight's landing reaches the hook that stays, not the removed one.
    removed = fleet.gg("hook", "remove", hook_a)
    assert removed.returncode == 0, removed.stderr
    second = api.open_flight({"command": ["echo", "again"]})["id"]
    wait_until(lambda: len(receiver.got("/b")) == 2, what="the landing after the removal")
    assert json.loads(receiver.got("/b")[1]["body"])["flight_id"] == second
    assert len(receiver.got("/a")) == 2
    assert fleet.gg("hook", "show", hook_a).returncode == 5  # not found: it is gone
    assert [h["id"] for h in json.loads(fleet.gg("hooks", "--json").stdout)] == [hook_b]


def test_deliveries_pending_at_a_sigkill_all_arrive_in_order_per_flight_after_a_restart(
        make_fleet, receivers):
    receiver = receivers()  # not listening yet: every attempt fails to connect
    fleet = make_fleet(QUICK)
    hook, secret = add_hook(fleet, receiver.url(), "opened,claimed,landed")
    fleet.runner("r1", workers=2)
    fleet.wait_online("r1")
    api = fleet.api()
    ids = [api.open_flight({"command": ["echo", str(i)]})["id"] for i in range(3)]
    wait_until(lambda: all(landed(api, i) for i in ids), what="three flights to land")

    def tried():
        detail = api.hook(hook)
        return len(detail["deliveries"]) == 9 and all(d["attempts"] >= 1 and
                                                      d["delivered_at"] is None
                                                      for d in detail["deliveries"]
                                                      if d["event"] == "opened")
    wait_until(tried, what="the first attempts to fail")

    fleet.server.stop(sig=9)  # SIGKILL: no shutdown of any kind
    receiver.start()
    fleet.server.start()

    def everything():
        got = receiver.got()
        events = {(json.loads(r["body"])["flight_id"], json.loads(r["body"])["event"])
                  for r in got if r["status"] == 200}
        return got if len(events) == 9 else None

    got = wait_until(everything, timeout=30, what="every event to arrive")
    assert all(signed_by(secret, r) for r in got)
    for flight_id in ids:
        order = [json.loads(r["body"])["event"] for r in got
                 if json.loads(r["body"])["flight_id"] == flight_id]
        collapsed = [e for n, e in enumerate(order) if n == 0 or order[n - 1] != e]
        assert collapsed == ["opened", "claimed", "landed"], order
    detail = wait_until(lambda: (lambda d: d if all(x["delivered_at"] for x in d["deliveries"])
                                 else None)(api.hook(hook)), what="every row marked delivered")
    assert len(detail["deliveries"]) == 9


def test_only_an_admin_adds_a_hook_and_an_unknown_event_name_is_refused(fleet, receivers):
    bob = fleet.api().add_person("bob", False)["token"]
    with pytest.raises(ApiError) as refused:
        Client(fleet.url, bob).add_hook(receivers().url(), ["landed"])
    assert refused.value.status == 403
    with pytest.raises(ApiError) as listing:
        Client(fleet.url, bob).hooks()
    assert listing.value.status == 403
    unknown = fleet.gg("hook", "add", "http://127.0.0.1:9/x", "--on", "landed,exploded")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert unknown.stderr.strip().count("\n") == 0 and "exploded" in unknown.stderr
    assert json.loads(fleet.gg("hooks", "--json").stdout) == []


def test_a_runner_going_silent_reaches_a_hook_on_runner_offline(make_fleet, receivers):
    receiver = receivers().start()
    fleet = make_fleet(QUICK)
    added = fleet.gg("hook", "add", receiver.url(), "--on", "runner.offline")
    assert added.returncode == 0, added.stderr
    secret = added.stdout.strip().splitlines()[-1]
    assert secret.startswith("ggh_") and "runner.offline" in added.stdout
    listed = fleet.gg("hooks")
    assert listed.returncode == 0 and f"127.0.0.1:{receiver.port}" in listed.stdout
    assert secret not in listed.stdout
    fleet.runner("r1")
    row = fleet.wait_online("r1")["r1"]
    fleet.runners[0].stop(sig=9)  # silent from now on
    [got] = wait_until(receiver.got, what="the runner.offline event")
    event = json.loads(got["body"])
    assert signed_by(secret, got)
    assert event["event"] == "runner.offline" and event["runner_id"] == row["id"]
    assert event["flight_id"] is None


def answers_of(fleet, hook_id: str) -> list[dict]:
    """Every attempt's answer `gg hook show` lists for the hook, oldest delivery first."""
    detail = json.loads(fleet.gg("hook", "show", hook_id, "--json").stdout)
    return [a for d in reversed(detail["deliveries"]) for a in d["answers"]]


def test_an_answer_without_end_is_read_only_to_its_limit_and_tried_again(make_fleet,
                                                                           unending):
    receiver = unending("flood")
    fleet = make_fleet({**QUICK, "GG_HOOK_TIMEOUT": "60"})  # the answer's limit ends it
    hook, _ = add_hook(fleet, receiver.url(), "opened")
    server = psutil.Process(fleet.server.proc.pid)
    before = server.memory_info().rss
    peak = [before]

    def enough():
        peak.append(server.memory_info().rss)
        return len(receiver.got()) >= 3 or receiver.sent >= 400 * 1024 ** 2

    fleet.api().open_flight({"command": ["echo", "hi"]})
    wait_until(enough, timeout=60, what="three attempts, or 400 MB sent")
    grown = (max(peak) - before) / 1024 ** 2
    print(f"server RSS grew {grown:.1f} MB while the receiver sent "
          f"{receiver.sent / 1024 ** 2:.1f} MB in {len(receiver.got())} attempts")
    assert len(receiver.got()) >= 3, f"one attempt read {receiver.sent} bytes and went on"
    assert grown < 48, f"the server grew {grown:.1f} MB reading a hook's answer"
    errors = wait_until(lambda: [a["error"] for a in answers_of(fleet, hook)
                                 if a["error"]], what="the failed attempts in gg hook show")
    assert "an answer longer than 65536 bytes (GG_HOOK_ANSWER_LIMIT)" in errors[0]


def test_an_answer_that_trickles_ends_at_the_deadline_and_is_tried_again(make_fleet,
                                                                         unending):
    receiver = unending("trickle")
    fleet = make_fleet({**QUICK, "GG_HOOK_TIMEOUT": "1"})
    hook, _ = add_hook(fleet, receiver.url(), "opened")
    fleet.api().open_flight({"command": ["echo", "hi"]})
    wait_until(lambda: len(receiver.got()) >= 2, timeout=30,
               what="a second attempt after the first met its deadline")
    assert receiver.got()[0] == receiver.got()[1]  # the same delivery, tried again
    errors = wait_until(lambda: [a["error"] for a in answers_of(fleet, hook)
                                 if a["error"]], what="the failed attempt in gg hook show")
    assert errors[0] == "no whole answer within 1s (GG_HOOK_TIMEOUT)"


def test_a_receiver_that_hangs_does_not_hold_up_another_hooks_deliveries(make_fleet,
                                                                         receivers, unending):
    hanging = unending("hang")
    fine = receivers().start()
    fleet = make_fleet({**QUICK, "GG_HOOK_TIMEOUT": "300"})  # the server waits on the hang
    add_hook(fleet, hanging.url(), "opened")
    add_hook(fleet, fine.url(), "opened")
    api = fleet.api()
    first = api.open_flight({"command": ["echo", "1"]})["id"]
    wait_until(lambda: hanging.got() and fine.got(), what="both hooks to hear the first flight")
    second = api.open_flight({"command": ["echo", "2"]})["id"]
    third = api.open_flight({"command": ["echo", "3"]})["id"]
    got = wait_until(lambda: (lambda g: g if len(g) >= 3 else None)(fine.got()), timeout=30,
                     what="the second hook to hear the next flights while the first hangs")
    heard = [json.loads(r["body"])["flight_id"] for r in got]
    # in order per flight only (docs/operations.md): two flights' events may cross
    assert heard[0] == first and sorted(heard[1:]) == sorted([second, third])
    assert not hanging.stopping.is_set()  # each hanging request is still held, unanswered
    assert json.loads(hanging.got()[0])["flight_id"] == first
