"""Resource limits enforced for real: a real control plane, a real runner, the real CLI, and
the host's cgroups (v2 where the unified hierarchy has the controllers, v1 where they are
mounted as v1).

One fleet flies every kind of flight here (a server start is the suite's dearest thing):
an allocation over its ``--memory`` is killed and fails saying why while the runner's other
flight flies on, a fork bomb stops at its ``--pids`` and its children go with it, a busy loop
under ``--cpus 0.5`` gets well under a core, and each flight's peak memory and CPU seconds are
facts that ``gg show`` prints. The measured CPU share is bench/limits.py's (docs/isolation.md).
"""

from __future__ import annotations

import json
import os

import pytest

from gg.client import ApiError
from gg.runner import cgroups

from support import gone, wait_until

USABLE = cgroups.limits_usable() if os.geteuid() == 0 else {}
MISSING = [c for c in ("memory", "pids", "cpu") if c not in USABLE]
pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"this host gives no cgroup controller {', '.join(MISSING)} to a flight "
           f"(run as root on a host with them, v1 or v2)")

# Forks 500 children that sleep, counting the forks the kernel refuses; prints both counts
# and the children's pids, then exits while they still sleep (its cgroup ends them).
FORKS = """
import os, sys
started, refused = [], 0
for _ in range(500):
    try:
        pid = os.fork()
    except BlockingIOError:
        refused += 1
        continue
    if pid == 0:
        os.execvp("sleep", ["sleep", "30"])
    started.append(pid)
print(len(started), refused, " ".join(map(str, started)), flush=True)
"""
# Burns CPU for 3 s of wall time and prints the share of a core it got.
BUSY = """
import time
wall, cpu = time.monotonic(), time.process_time()
while time.monotonic() - wall < 3:
    pass
print(round((time.process_time() - cpu) / (time.monotonic() - wall), 3), flush=True)
"""


def _ended(api, flight_id: str) -> dict | None:
    shown = api.flight(flight_id)
    return shown if shown["stage"] in ("landed", "failed", "cancelled") else None


def _fly(fleet, *args: str) -> str:
    opened = fleet.gg("fly", "--json", *args)
    assert opened.returncode == 0, opened.stderr
    return json.loads(opened.stdout)["id"]


def _output(flight: dict) -> str:
    return "".join(f["body"].get("text", "") for f in flight["facts"] if f["kind"] == "output")


def _usage(flight: dict) -> dict:
    notes = [f["body"] for f in flight["facts"]
             if f["kind"] == "note" and "cpu_seconds" in f["body"]]
    assert len(notes) == 1, flight["facts"]
    return notes[0]


def test_limits_are_enforced_by_cgroups_bad_ones_open_nothing_and_usage_is_a_fact(
        fleet, tmp_path):
    fleet.runner("r1", workers=2)
    fleet.wait_online("r1")
    api = fleet.api()
    gate = tmp_path / "go"

    # bad limits, and limits over the runner's maximum: one sentence, nothing opened
    set_max = fleet.gg("runner", "policy", "r1", "--max-memory", "1G", "--max-pids", "1000")
    assert set_max.returncode == 0, set_max.stderr
    assert "no default limits (max memory 1G, pids 1000)" in set_max.stdout
    for args, said in (
            (("--memory", "12Q"), "--memory: memory must be a size like 512M or 2G, not '12Q'\n"),
            (("--cpus", "0"), "--cpus: cpus must be between 0.01 and 1024, not 0\n"),
            (("--pids", "-1"), "--pids: pids must be between 1 and 4194304, not -1\n"),
            (("--runner", "r1", "--memory", "2G"),
             "--memory 2G is more than the policy of that runner allows (at most 1G)\n")):
        refused = fleet.gg("fly", *args, "--", "true")
        assert (refused.returncode, refused.stderr) == (2, said), args
    with pytest.raises(ApiError) as over_http:
        api.request("POST", "/v1/flights", json={"command": ["true"], "limits": {"cpus": 0}})
    assert 400 <= over_http.value.status < 500
    assert api.flights() == []

    # the runner's other flight: it flies until the allocation has been killed
    other = _fly(fleet, "--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    wait_until(lambda: api.flight(other)["stage"] == "flying", what="the other flight to fly")
    hog = _fly(fleet, "--memory", "256M", "--",
               "python3", "-c", "b = bytearray(1 << 30); print('not killed')")
    failed = wait_until(lambda: _ended(api, hog), timeout=60, what="the allocation to end")
    assert (failed["stage"], failed["ended_reason"]) == (
        "failed", "killed: out of memory (limit 256M)")
    assert "not killed" not in _output(failed)
    assert api.flight(other)["stage"] == "flying"  # the other flight was not touched
    gate.write_text("")
    landed = wait_until(lambda: _ended(api, other), timeout=60, what="the other flight to end")
    assert landed["stage"] == "landed"
    assert _usage(failed)["peak_memory_bytes"] <= 256 * 1024 * 1024

    # a fork bomb stops at its pids limit; its children die with it; the runner flies on
    bomb = _fly(fleet, "--pids", "64", "--", "python3", "-c", FORKS)
    done = wait_until(lambda: _ended(api, bomb), timeout=90, what="the fork bomb to end")
    assert done["stage"] == "landed", _output(done)
    started, refused, *pids = _output(done).split()
    assert int(started) < 64 and int(refused) > 0
    wait_until(lambda: all(gone(int(p)) for p in pids), timeout=15,
               what="the fork bomb's children to be gone")
    after = _fly(fleet, "--", "true")
    assert wait_until(lambda: _ended(api, after), timeout=60,
                      what="the next flight to end")["stage"] == "landed"
    assert fleet.runner_row("r1")["health"] == "ok"

    # a busy loop under half a core gets well under a whole one (the figure: bench/limits.py)
    busy = _fly(fleet, "--cpus", "0.5", "--", "python3", "-c", BUSY)
    measured = wait_until(lambda: _ended(api, busy), timeout=60, what="the busy loop to end")
    assert measured["stage"] == "landed"
    assert float(_output(measured)) < 0.8
    usage = _usage(measured)
    assert 0 < usage["cpu_seconds"] < 0.8 * 3 + 1  # 3 s at most 0.8 of a core, and its start

    shown = fleet.gg("show", busy)
    assert shown.returncode == 0 and f"cpu_seconds={usage['cpu_seconds']}" in shown.stdout
    assert "peak_memory=" in shown.stdout, shown.stdout

