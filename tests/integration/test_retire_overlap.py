"""Retire and kill never run a flight twice at once: real server, real runners, real processes.

Each flight runs a small script (isolation none, the --dev default) that appends a line per
event to a file on the host: its attempt, what happened (start, end, stopped by SIGTERM) and
``time.time()``. The test then reads the file and shows that attempt 1's process had ended
before attempt 2 started.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from support import gone, wait_until

RETIRED_SENTENCE = "this runner was retired by an admin; it exits and will not come back"

SCRIPT = r'''
import json, os, signal, subprocess, sys, time
log, attempt = sys.argv[1], int(os.environ["GG_ATTEMPT"])

def write(word, **more):
    with open(log, "a") as fh:
        fh.write(json.dumps({"attempt": attempt, "event": word, "at": time.time(),
                             "pid": os.getpid(), **more}) + "\n")

def stopped(signum, frame):
    write("stopped")
    sys.exit(143)

signal.signal(signal.SIGTERM, stopped)
if attempt == 1:  # runs until it is stopped, saying it is alive every 50 ms
    child = subprocess.Popen(["sleep", "600"])
    write("start", child=child.pid)
    while True:
        write("alive")
        time.sleep(0.05)
write("start")
write("end")
'''


def _flight(fleet, tmp_path: Path) -> tuple[dict, Path]:
    script, log = tmp_path / "attempt.py", tmp_path / "attempts.jsonl"
    script.write_text(SCRIPT)
    flight = fleet.api().open_flight({"command": [f"{sys.executable} {script} {log}"],
                                      "title": "records its attempts"})
    return flight, log


def _lines(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _event(log: Path, attempt: int, event: str) -> dict | None:
    return next((e for e in _lines(log) if (e["attempt"], e["event"]) == (attempt, event)), None)


def _last(log: Path, attempt: int) -> dict:
    """The last line attempt ``attempt`` wrote: after it, that attempt's process said nothing."""
    return [e for e in _lines(log) if e["attempt"] == attempt][-1]


def _landed_on(fleet, flight_id: str, runner: str) -> dict | None:
    shown = fleet.api().flight(flight_id)
    return shown if shown["stage"] == "landed" and shown["runner_name"] == runner else None


def _isolation(fleet, name: str) -> str:
    return next(r for r in fleet.api().runners() if r["name"] == name)["policy"]["isolation"]


def test_retire_stops_attempt_one_before_attempt_two_starts(make_fleet, tmp_path):
    # A lease long enough that only the retired runner's hand-back can bring it back soon.
    fleet = make_fleet({"GG_LEASE_TTL": "30", "GG_LEASE_RENEW_AT": "10"})
    a = fleet.runner("a")
    fleet.wait_online("a")
    assert _isolation(fleet, "a") == "none"
    flight, log = _flight(fleet, tmp_path)
    first = wait_until(lambda: _event(log, 1, "start"), what="attempt 1 to start on a")
    fleet.runner("b")
    fleet.wait_online("b")

    done = fleet.gg("runner", "retire", "a", "--yes")
    assert done.returncode == 0, done.stderr
    assert f"it is stopping 1 flight(s) ({flight['id']})" in done.stdout

    shown = wait_until(lambda: _landed_on(fleet, flight["id"], "b"), timeout=60,
                       what="the flight to land on b")
    second = _event(log, 2, "start")
    last = _last(log, 1)  # its SIGTERM handler's "stopped", or its last beat when the kill
    # came first (a busy machine: the launcher's watchdog may end the tree before the handler
    # writes); either way nothing of attempt 1 comes after attempt 2 began
    assert _event(log, 1, "end") is None, _lines(log)  # never ran to its end
    assert first["at"] <= last["at"] <= second["at"], _lines(log)  # no overlap
    wait_until(lambda: gone(first["child"]), timeout=10, what="attempt 1's child to be gone")
    assert [(t["attempt"], t["runner_name"]) for t in shown["attempts"]] == [(1, "a"), (2, "b")]
    # It came back by a's acknowledgement of the stop, not by its lease running out.
    kinds = [(f["kind"], f["epoch"], (f["body"] or {}).get("reason")) for f in shown["facts"]]
    assert ("returned", 1, "the runner was retired: it stopped the flight") in kinds, kinds
    assert not any(k == "expired" for k, _, _ in kinds), kinds
    assert a.proc.wait(timeout=30) == 1
    assert RETIRED_SENTENCE in fleet.log("a")


def test_a_killed_runner_leaves_no_flight_process_behind(fleet, tmp_path):
    a = fleet.runner("a")
    fleet.wait_online("a")
    assert _isolation(fleet, "a") == "none"
    flight, log = _flight(fleet, tmp_path)
    first = wait_until(lambda: _event(log, 1, "start"), what="attempt 1 to start on a")
    fleet.runner("b")
    fleet.wait_online("b")
    pids = [first["pid"], first["child"]]  # the flight's command, and a child it started
    assert not any(gone(pid) for pid in pids)

    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(timeout=10)
    try:
        wait_until(lambda: all(gone(pid) for pid in pids), timeout=10,
                   what="the killed runner's flight processes to be gone")
    finally:
        for pid in pids:  # left behind only if the promise is broken: do not leak them
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)

    shown = wait_until(lambda: _landed_on(fleet, flight["id"], "b"), timeout=60,
                       what="the flight to land on b after a's lease expired")
    second = _event(log, 2, "start")
    assert second is not None, _lines(log)
    assert _last(log, 1)["at"] < second["at"], _lines(log)  # attempt 1 fell silent first
    assert _event(log, 1, "stopped") is None  # killed with the runner, not asked to stop
    assert all(gone(pid) for pid in pids)
    assert [(t["attempt"], t["runner_name"]) for t in shown["attempts"]] == [(1, "a"), (2, "b")]
    assert any(f["kind"] == "expired" for f in shown["facts"])
