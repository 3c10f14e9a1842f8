"""Attempts never overlap, whatever happens to the runner: cut off from the control plane,
frozen (SIGSTOP), retired, or its flight timed out with children that left its group; for a
dial-out runner and for a pull-mode one (``gg runner up --listen``).

Real server, real runners, real processes, isolation none. Each flight's command appends
beats (its attempt, ``time.time()``) to a file outside its workspace; the test reads them and
shows that attempt 1's last beat came before attempt 2's first, on this one machine's clock.
A partition is a relay on loopback between a runner and its server that the test cuts: the
runner's requests then hang unanswered, as over a dead link. A pull-mode runner lives in a
network namespace of its own, reached through one forwarded port; the test brings that
namespace's only link down, so the control plane's polls go nowhere.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path

import pytest

from gg.launch import LocalRunner, free_port

from pull_support import PullRunner, netns_available
from support import gone, wait_until

# Leases a loaded machine renews comfortably: the runner stops a flight it could not renew
# 2 s before its lease runs out, and its launcher kills the tree 1 s before.
LEASES = {"GG_LEASE_TTL": "6", "GG_LEASE_RENEW_AT": "4", "GG_LEASE_MARGIN": "2"}

BEATS = r'''
import json, os, sys, time
log, attempt = sys.argv[1], int(os.environ["GG_ATTEMPT"])

def beat(**more):
    with open(log, "a") as fh:
        fh.write(json.dumps({"attempt": attempt, "at": time.time(), "pid": os.getpid(),
                             **more}) + "\n")

if attempt > 1:  # the next attempt says it began, and ends
    beat()
    sys.exit(0)
if len(sys.argv) > 2 and os.fork() == 0:  # a child in a session of its own, deaf to SIGTERM
    os.setsid()
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    beat()
    time.sleep(0.05)
'''


class Relay:
    """A TCP relay from a loopback port to the server; :meth:`cut` makes it a black hole:
    open connections are dropped and new ones are accepted and never answered."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = free_port()
        self.cut_off = threading.Event()
        self.held: list[socket.socket] = []
        self._lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        self.cut_off.set()
        with self._lock:
            for sock in self.held:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.cut()
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.held.append(conn)
            if self.cut_off.is_set():
                continue  # held open, never read: the request waits for nothing
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                conn.close()
                continue
            with self._lock:
                self.held.append(upstream)
            for src, dst in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self.cut_off.is_set():
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _runner_through(fleet, relay: Relay, name: str) -> LocalRunner:
    runner = LocalRunner(name, relay.url, fleet.root / f"state-{name}", fleet.config_dir,
                         env=dict(fleet.env), log=fleet.root / f"runner-{name}.log")
    fleet.runners.append(runner.start())
    return runner


def _beats(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _open(fleet, tmp_path: Path, *extra: str) -> tuple[str, Path]:
    script, log = tmp_path / "beats.py", tmp_path / "beats.jsonl"
    script.write_text(BEATS)
    flight = fleet.api().open_flight({"command": [f"{sys.executable} {script} {log} {' '.join(extra)}"],
                                      "title": "beats with its attempt"})
    return flight["id"], log


def _attempt_two_began(log: Path) -> dict | None:
    return next((b for b in _beats(log) if b["attempt"] == 2), None)


def _no_overlap(log: Path) -> None:
    """Attempt 1's last beat came before attempt 2's first; and it stays so."""
    second = wait_until(lambda: _attempt_two_began(log), timeout=60, what="attempt 2 to begin")
    ones = [b for b in _beats(log) if b["attempt"] == 1]
    assert ones, "attempt 1 never beat"
    assert ones[-1]["at"] < second["at"], (
        f"attempt 1 beat {ones[-1]['at'] - second['at']:.2f}s after attempt 2 began")
    for pid in {b["pid"] for b in ones}:  # and nothing of attempt 1 is left to beat later
        wait_until(lambda: gone(pid), timeout=10, what=f"attempt 1's process {pid} to be gone")


def _kill_leftovers(log: Path) -> None:
    """Attempt 1's processes, left behind only if the promise is broken: do not leak them."""
    for pid in {b["pid"] for b in _beats(log) if b["attempt"] == 1}:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_partitioned_runner_stops_attempt_one_before_attempt_two_begins(make_fleet, tmp_path):
    fleet = make_fleet(LEASES)
    relay = Relay(int(fleet.url.rsplit(":", 1)[1]))
    log = tmp_path / "beats.jsonl"
    try:
        _runner_through(fleet, relay, "cut")
        fleet.wait_online("cut")
        flight, log = _open(fleet, tmp_path)
        wait_until(lambda: _beats(log), what="attempt 1 to beat on the cut-off runner")
        relay.cut()  # from now on its renewals go nowhere
        fleet.runner("other")
        _no_overlap(log)
        shown = wait_until(lambda: (lambda f: f if f["stage"] == "landed" else None)(
            fleet.api().flight(flight)), timeout=60, what="attempt 2 to land")
        assert [a["runner_name"] for a in shown["attempts"]] == ["cut", "other"]
        wait_until(lambda: "could not be renewed in time" in fleet.log("cut"), timeout=10,
                   what="the cut-off runner to say why it stopped the flight")
    finally:
        relay.close()
        _kill_leftovers(log)


def test_a_frozen_runners_launcher_kills_attempt_one_before_attempt_two_begins(make_fleet,
                                                                               tmp_path):
    fleet = make_fleet(LEASES)
    frozen = fleet.runner("frozen")
    fleet.wait_online("frozen")
    flight, log = _open(fleet, tmp_path)
    wait_until(lambda: _beats(log), what="attempt 1 to beat on the runner")
    frozen.proc.send_signal(signal.SIGSTOP)  # its alarm, its keeper: nothing of it runs
    try:
        fleet.runner("other")
        _no_overlap(log)
    finally:
        frozen.proc.send_signal(signal.SIGCONT)
        _kill_leftovers(log)
    shown = wait_until(lambda: (lambda f: f if f["stage"] == "landed" else None)(
        fleet.api().flight(flight)), timeout=60, what="attempt 2 to land")
    assert [a["runner_name"] for a in shown["attempts"]] == ["frozen", "other"]


def test_retire_stops_a_setsid_child_of_attempt_one_before_attempt_two_starts(make_fleet,
                                                                              tmp_path):
    # A lease long enough that only the retired runner's hand-back brings the flight back.
    fleet = make_fleet({"GG_LEASE_TTL": "30", "GG_LEASE_RENEW_AT": "10"})
    fleet.runner("a")
    fleet.wait_online("a")
    flight, log = _open(fleet, tmp_path, "--escape")
    wait_until(lambda: len({b["pid"] for b in _beats(log)}) == 2,
               what="attempt 1 and its escaped child to beat")
    fleet.runner("b")
    fleet.wait_online("b")
    try:
        done = fleet.gg("runner", "retire", "a", "--yes")
        assert done.returncode == 0, done.stderr
        _no_overlap(log)
    finally:
        _kill_leftovers(log)
    shown = fleet.api().flight(flight)
    kinds = [(f["kind"], f["epoch"]) for f in shown["facts"]]
    assert ("returned", 1) in kinds and ("expired", 1) not in kinds, kinds


def test_setsid_children_past_a_timeout_are_killed_with_isolation_none(fleet, tmp_path):
    fleet.runner("r")
    fleet.wait_online("r")
    pidfile = tmp_path / "escaped"
    # `setsid` in the background: a session of its own, out of the flight's process group.
    command = f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 600' & sleep 600"
    opened = fleet.gg("fly", "--timeout", "2s", "--json", "--", "sh", "-c", command)
    assert opened.returncode == 0, opened.stderr
    flight = json.loads(opened.stdout)
    escaped = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(),
                             what="the escaped child to start"))
    try:
        assert os.getsid(escaped) == escaped  # it really left the flight's session
        shown = wait_until(lambda: (lambda f: f if f["stage"] == "failed" else None)(
            fleet.api().flight(flight["id"])), timeout=30, what="the flight to time out")
        assert shown["ended_reason"] == "timed out after 2s"
        wait_until(lambda: gone(escaped), timeout=10, what="the escaped child to be killed")
    finally:
        if not gone(escaped):
            os.kill(escaped, signal.SIGKILL)


SERVICE = r'''
import json, os, socket, sys, time
log, attempt = sys.argv[1], int(os.environ["GG_ATTEMPT"])
server = socket.create_server(("127.0.0.1", int(os.environ["PORT"])))
server.settimeout(0.05)
while True:
    with open(log, "a") as fh:  # a beat while it serves
        fh.write(json.dumps({"attempt": attempt, "at": time.time(), "pid": os.getpid(),
                             "port": int(os.environ["PORT"])}) + "\n")
    try:
        conn, _ = server.accept()
    except socket.timeout:
        continue
    conn.sendall(str(attempt).encode())
    conn.close()
'''


def _answers(port: int) -> str | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            return conn.recv(16).decode() or None
    except OSError:
        return None


def test_a_partitioned_runners_service_generation_stops_before_the_re_placement_serves(
        make_fleet, tmp_path):
    fleet = make_fleet(LEASES)
    relay = Relay(int(fleet.url.rsplit(":", 1)[1]))
    script, log = tmp_path / "service.py", tmp_path / "service.jsonl"
    script.write_text(SERVICE)
    try:
        _runner_through(fleet, relay, "cut")
        fleet.wait_online("cut")
        done = fleet.gg("fly", "--service", "--", f"{sys.executable} {script} {log}")
        assert done.returncode == 0, done.stderr
        first = wait_until(lambda: next((b for b in _beats(log) if b["attempt"] == 1), None),
                           what="generation 1 to serve on the cut-off runner")
        assert _answers(first["port"]) == "1"
        relay.cut()
        fleet.runner("other")
        second = wait_until(lambda: _attempt_two_began(log), timeout=60,
                            what="the re-placement to serve")
        assert _answers(second["port"]) == "2"
        assert _answers(first["port"]) is None  # the old generation no longer serves
        ones = [b for b in _beats(log) if b["attempt"] == 1]
        assert ones[-1]["at"] < second["at"], (
            f"the old generation served {ones[-1]['at'] - second['at']:.2f}s after the "
            "re-placement began")
    finally:
        relay.close()
        _kill_leftovers(log)


# -- a pull-mode runner ------------------------------------------------------------------------

# Brings the namespace's `lo` down (the bridge to the runner's port goes over it).
LINK_DOWN = r"""
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags & ~1))
"""


def _pull_runner(fleet, tmp_path: Path, name: str, **kw) -> PullRunner:
    runner = PullRunner(tmp_path, name, fleet.env, **kw)
    wait_until(runner.fingerprint, what=f"{name} to listen")
    attached = fleet.gg("runner", "attach", runner.url, "--name", name)
    assert attached.returncode == 0, attached.stderr
    fleet.wait_online(name)
    return runner


def _landed_on(fleet, flight: str) -> list[str]:
    shown = wait_until(lambda: (lambda f: f if f["stage"] == "landed" else None)(
        fleet.api().flight(flight)), timeout=60, what="attempt 2 to land")
    return [a["runner_name"] for a in shown["attempts"]]


def test_a_cut_off_pull_runner_stops_attempt_one_before_attempt_two_begins(make_fleet,
                                                                           tmp_path):
    why = netns_available()
    if why is not None:
        pytest.skip(why)
    fleet = make_fleet(LEASES)
    runner = _pull_runner(fleet, tmp_path, "cut", netns=True)
    log = tmp_path / "beats.jsonl"
    try:
        flight, log = _open(fleet, tmp_path)
        wait_until(lambda: _beats(log), what="attempt 1 to beat on the pull-mode runner")
        down = runner.in_namespace(sys.executable, "-c", LINK_DOWN)
        assert down.returncode == 0, down.stderr  # from now on no poll reaches it
        fleet.runner("other")
        _no_overlap(log)
        assert _landed_on(fleet, flight) == ["cut", "other"]
        wait_until(lambda: "could not be renewed in time" in runner.output(), timeout=10,
                   what="the cut-off runner to say why it stopped the flight")
    finally:
        runner.kill()
        _kill_leftovers(log)


def test_a_frozen_pull_runners_launcher_kills_attempt_one_before_attempt_two_begins(
        make_fleet, tmp_path):
    fleet = make_fleet({**LEASES, "GG_PULL_TIMEOUT": "2"})
    runner = _pull_runner(fleet, tmp_path, "frozen")
    log = tmp_path / "beats.jsonl"
    try:
        flight, log = _open(fleet, tmp_path)
        wait_until(lambda: _beats(log), what="attempt 1 to beat on the pull-mode runner")
        runner.proc.send_signal(signal.SIGSTOP)  # it answers no poll; its alarm never rings
        try:
            fleet.runner("other")
            _no_overlap(log)
        finally:
            runner.proc.send_signal(signal.SIGCONT)
        assert _landed_on(fleet, flight) == ["frozen", "other"]
    finally:
        runner.kill()
        _kill_leftovers(log)
