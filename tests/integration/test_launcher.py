"""The runner's launcher under real runners: every flight's process group dies with the
runner, a killed launcher fails its flights plainly and is replaced, exit statuses and signals
come through unchanged, and one launcher serves many concurrent flights."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import psutil
import pytest

from gg.runner.launching import LAUNCHER_DIED

from support import gone, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the parent-death signal is Linux's")


def _sleeper(api, folder: Path, n: int) -> str:
    """A flight that starts a child in its group and writes (child, itself, its parent)."""
    out = folder / f"pids{n}"
    return api.open_flight({"command": [f"sleep 600 & echo $! $$ $PPID > {out}.tmp; "
                                        f"mv {out}.tmp {out}; wait"]})["id"]


def _pids(folder: Path, n: int) -> list[int]:
    path = folder / f"pids{n}"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _ended(api, flight_id: str) -> dict | None:
    shown = api.flight(flight_id)
    return shown if shown["stage"] in ("landed", "failed") else None


def _output(shown: dict) -> str:
    return "".join(f["body"]["text"] for f in shown["facts"] if f["kind"] == "output")


def _kill_left(pids: list[int]) -> None:
    for pid in pids:  # left behind only if a promise is broken: do not leak them
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)



def _kill_runner_and_see_gone(runner, found: list[int], what: str) -> None:
    """SIGKILL the runner; every pid in ``found`` must be gone soon after."""
    try:
        runner.proc.send_signal(signal.SIGKILL)
        runner.proc.wait(timeout=10)
        wait_until(lambda: all(gone(pid) for pid in found), timeout=10, what=f"{what} to be gone")
    finally:
        _kill_left(found)

def test_a_killed_runner_leaves_no_flight_process_group_behind(fleet, tmp_path):
    runner = fleet.runner("a", workers=3)
    fleet.wait_online("a")
    api = fleet.api()
    for n in range(3):
        _sleeper(api, tmp_path, n)
    wait_until(lambda: all(_pids(tmp_path, n) for n in range(3)), timeout=60,
               what="three flights to start")
    found = [pid for n in range(3) for pid in _pids(tmp_path, n)]
    launchers = set(found[2::3])
    assert len(launchers) == 1  # one launcher forks every flight of the runner
    assert psutil.Process(next(iter(launchers))).ppid() == runner.proc.pid
    assert not any(gone(pid) for pid in found)
    _kill_runner_and_see_gone(runner, found,
                              "the launcher, every flight's process and their children")


def test_a_killed_launcher_fails_its_flight_with_a_note_and_the_next_flight_runs(fleet,
                                                                                 tmp_path):
    fleet.runner("a")
    fleet.wait_online("a")
    api = fleet.api()
    first = _sleeper(api, tmp_path, 0)
    wait_until(lambda: _pids(tmp_path, 0), timeout=60, what="the flight to start")
    child, command, launcher = _pids(tmp_path, 0)
    try:
        os.kill(launcher, signal.SIGKILL)
        shown = wait_until(lambda: _ended(api, first), timeout=60, what="the flight to end")
        wait_until(lambda: gone(child) and gone(command), timeout=10,
                   what="the flight's process and its child to be gone")
    finally:
        _kill_left([child, command])
    assert shown["stage"] == "failed" and shown["exit_code"] == -signal.SIGKILL
    assert shown["ended_reason"] == LAUNCHER_DIED

    second = api.open_flight({"command": ["echo $PPID"]})["id"]
    shown = wait_until(lambda: _ended(api, second), timeout=60, what="the next flight to end")
    assert shown["stage"] == "landed" and shown["runner_name"] == "a"
    assert int(_output(shown)) not in (launcher, 0)  # a new launcher forked it


def test_exit_codes_and_signals_come_through_the_launcher_unchanged(fleet):
    fleet.runner("a", workers=2)
    fleet.wait_online("a")
    api = fleet.api()
    cases = {"exit 0": ("landed", 0, None), "exit 3": ("failed", 3, None),
             "kill -TERM $$": ("failed", -signal.SIGTERM, None),
             "kill -KILL $$": ("failed", -signal.SIGKILL, None),
             "no-such-command-here": ("failed", 127, None)}
    ids = {cmd: api.open_flight({"command": [cmd]})["id"] for cmd in cases}
    for cmd, flight_id in ids.items():
        shown = wait_until(lambda: _ended(api, flight_id), timeout=60, what=f"{cmd!r} to end")
        assert (shown["stage"], shown["exit_code"], shown["ended_reason"]) == cases[cmd], cmd


def test_many_concurrent_flights_on_one_runner_share_its_launcher(fleet):
    fleet.runner("a", workers=8)
    fleet.wait_online("a")
    api = fleet.api()
    ids = [api.open_flight({"command": [f"echo $PPID; sleep 0.2; exit {n % 4}"]})["id"]
           for n in range(32)]
    shown = [wait_until(lambda: _ended(api, i), timeout=120, what="32 flights to end")
             for i in ids]
    assert [s["exit_code"] for s in shown] == [n % 4 for n in range(32)]
    assert len({_output(s) for s in shown}) == 1  # every one forked by the same launcher


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")
def test_a_sandboxed_flight_is_forked_by_the_launcher_and_dies_with_the_runner(fleet):
    """bubblewrap is the launcher's child: its --die-with-parent ties the sandbox to the
    launcher, which kills every group when the runner is SIGKILLed."""
    runner = fleet.runner("a")
    fleet.wait_online("a")
    done = fleet.gg("runner", "policy", "a", "--isolation", "sandbox")
    assert done.returncode == 0, done.stderr
    wait_until(lambda: "isolation sandbox" in fleet.log("a"), what="the runner took the policy")
    fleet.api().open_flight({"command": ["sleep 600 & sleep 600"]})

    def sandbox() -> list[int]:
        for launcher in psutil.Process(runner.proc.pid).children():
            for child in launcher.children():
                inside = child.children(recursive=True)
                if child.name() == "bwrap" and sum(p.name() == "sleep" for p in inside) == 2:
                    return [launcher.pid, child.pid, *(p.pid for p in inside)]
        return []

    found = wait_until(sandbox, timeout=60, what="the sandboxed flight to start")
    _kill_runner_and_see_gone(runner, found, "the launcher and the whole sandbox")
