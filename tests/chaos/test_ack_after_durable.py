"""Ack after durable: the control plane is SIGKILLed while many flights are being opened,
claimed, reported and handed back at once (the group commit is busy), and every answer it
gave before dying must be in the store it restarts on; nothing it accepted is accepted twice.

The runners are simulated in this process over the real protocol (registered with a key
proof, claiming, reporting and handing back over HTTP), so that every acknowledgement is
seen by the test: an answered ``POST /v1/flights``, an answered report, an answered
hand-back. Requests that got no answer (the connection died with the server) prove nothing
and are not counted.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import httpx
import pytest

from gg.proof.invariants import Restart, check

from support import FAST, Fleet, auth, http_proof, wait_until

OPENERS = 4
RUNNERS = 6


class Acks:
    def __init__(self):
        self.lock = threading.Lock()
        self.opened: set[str] = set()
        self.reported: dict[str, tuple[str, int]] = {}  # fact key -> (flight, epoch)
        self.handed_back: dict[str, tuple[int, str]] = {}  # flight -> (epoch, outcome)
        self.last_hand_back: dict[str, tuple[str, dict]] = {}  # runner -> (flight, body)


def _opener(url: str, token: str, n: int, acks: Acks, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=10) as http:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                r = http.post("/v1/flights", headers=auth(token),
                              json={"command": [f"echo {n}-{i}"]})
            except httpx.HTTPError:
                continue
            if r.status_code == 201:
                with acks.lock:
                    acks.opened.add(r.json()["id"])


def _runner(url: str, credential: str, name: str, acks: Acks, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=10) as http:
        checked_in = 0.0
        while not stop.is_set():
            try:
                if time.monotonic() - checked_in > float(FAST["GG_CHECK_IN_INTERVAL"]):
                    http.post("/v1/runner/check-in", headers=auth(credential),
                              json={"free_slots": 1})  # stays online, as a runner does
                    checked_in = time.monotonic()
                r = http.post("/v1/runner/claim", headers=auth(credential),
                              json={"free_slots": 1, "wait": 1})
                if r.status_code != 200:
                    continue
                got = r.json()
                flight, epoch = got["flight"]["id"], got["lease"]["epoch"]
                key = f"{epoch}:output:1"
                r = http.post(f"/v1/runner/flights/{flight}/facts", headers=auth(credential),
                              json={"epoch": epoch, "facts": [
                                  {"kind": "output", "key": key, "body": {"text": "out\n"}}]})
                if r.status_code != 200:
                    continue
                with acks.lock:
                    acks.reported[key + "@" + flight] = (flight, epoch)
                body = {"epoch": epoch, "outcome": "landed", "exit_code": 0,
                        "key": f"{epoch}:hand-back"}
                r = http.post(f"/v1/runner/flights/{flight}/hand-back", headers=auth(credential),
                              json=body)
                if r.status_code == 200 and not r.json()["repeat"]:
                    with acks.lock:
                        acks.handed_back[flight] = (epoch, "landed")
                        acks.last_hand_back[name] = (flight, body)
            except httpx.HTTPError:
                continue


@pytest.mark.timeout(300)
def test_every_acknowledged_open_report_and_hand_back_survives_a_sigkill(tmp_path):
    fleet = Fleet(tmp_path, dict(FAST)).start()
    acks = Acks()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        url, token = fleet.url, fleet.server.owner_token()
        credentials = {}
        with httpx.Client(base_url=url, timeout=30) as http:
            for i in range(RUNNERS):
                reg = http.post("/v1/runners", headers=auth(token),
                                json={"name": f"sim{i}", **http_proof(http, "register")})
                assert reg.status_code == 201, reg.text
                credentials[f"sim{i}"] = reg.json()["credential"]
                http.post("/v1/runner/check-in", headers=auth(credentials[f"sim{i}"]),
                          json={"free_slots": 1})
        threads = [threading.Thread(target=_opener, args=(url, token, n, acks, stop), daemon=True)
                   for n in range(OPENERS)]
        threads += [threading.Thread(target=_runner, args=(url, cred, name, acks, stop),
                                     daemon=True) for name, cred in credentials.items()]
        for t in threads:
            t.start()
        # Kill it in full flow: many opens and hand-backs answered, more in flight.
        wait_until(lambda: len(acks.opened) >= 100 and len(acks.handed_back) >= 40,
                   timeout=200, what="flights flowing")
        down = time.time()
        fleet.server.proc.send_signal(9)
        fleet.server.proc.wait(timeout=30)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        with acks.lock:
            opened, reported = set(acks.opened), dict(acks.reported)
            handed_back, last = dict(acks.handed_back), dict(acks.last_hand_back)

        db = sqlite3.connect(f"file:{fleet.server.data_dir / 'gg.sqlite3'}?mode=ro", uri=True)
        try:
            stored = {row[0] for row in db.execute("SELECT id FROM flights")}
            assert opened <= stored, f"acknowledged opens lost: {sorted(opened - stored)[:5]}"
            facts = {(row[0], row[1]) for row in db.execute(
                "SELECT flight_id, idem_key FROM facts WHERE idem_key IS NOT NULL")}
            lost = [k for k, (flight, _) in reported.items() if (flight, k.split("@")[0]) not in facts]
            assert not lost, f"acknowledged reports lost: {lost[:5]}"
            rows = {row[0]: (row[1], row[2], row[3]) for row in db.execute(
                "SELECT id, stage, epoch, outcome FROM flights")}
            for flight, (epoch, outcome) in handed_back.items():
                assert rows[flight] == ("landed", epoch, outcome), (flight, rows[flight])
        finally:
            db.close()

        up = time.time()
        fleet.server.start()
        report = check(fleet.server.data_dir / "gg.sqlite3", lease_ttl=float(FAST["GG_LEASE_TTL"]),
                       restarts=[Restart(down_at=down, up_at=up)])
        assert report.ok, report.summary()
        # Nothing accepted twice: an acknowledged hand-back sent again is a repeat, and every
        # flight landed once.
        with httpx.Client(base_url=fleet.url, timeout=30) as http:
            for name, (flight, body) in last.items():
                again = http.post(f"/v1/runner/flights/{flight}/hand-back",
                                  headers=auth(credentials[name]), json=body)
                assert again.status_code == 200 and again.json()["repeat"], again.text
            landed = http.get("/v1/events", headers=auth(token),
                              params={"kind": "info:flight:landed", "limit": 10000}).json()
        per_flight: dict[str, int] = {}
        for event in landed:
            per_flight[event["flight_id"]] = per_flight.get(event["flight_id"], 0) + 1
        assert set(handed_back) <= set(per_flight)
        assert all(count == 1 for count in per_flight.values()), per_flight
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        fleet.stop()
