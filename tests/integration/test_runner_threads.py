"""What a flight costs a real runner process in threads (docs/performance.md, "The runner's
own CPU a flight"): the flight's own thread and, once its output outlives the first flush, a
reader; no lease keeper until the lease first needs renewing (the runner's one alarm thread
starts it then), and nothing of the flight's left behind once it is over. Counted in
/proc/PID/task of a real `gg runner up`."""

from __future__ import annotations

import os

from support import wait_until


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _stage(api, flight_id: str) -> str:
    return api.flight(flight_id)["stage"]


def test_a_flight_runs_on_a_kept_thread_and_starts_only_its_output_reader(make_fleet, tmp_path):
    # The first renewal is four minutes away and `started` rides with the first output, so
    # the lease keeper has nothing to do while these flights run.
    fleet = make_fleet({"GG_LEASE_TTL": "300", "GG_LEASE_RENEW_AT": "60",
                        "GG_STARTED_WITHIN": "60"})
    runner = fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    pid = runner.proc.pid
    first = api.open_flight({"command": ["true"]})  # starts the launcher, the alarm, a worker
    wait_until(lambda: _stage(api, first["id"]) == "landed", timeout=60, what="the first flight")
    idle = _threads(pid)  # the first flight's thread is kept, waiting for the next
    go = tmp_path / "go"
    flight = api.open_flight({"command": [f"echo hi; while [ ! -e {go} ]; do sleep 0.05; done"]})

    def printed():
        facts = api.flight(flight["id"])["facts"]
        return any(f["kind"] == "output" for f in facts)

    wait_until(printed, timeout=60, what="the flight's first output")  # read past the first flush
    # On the kept thread, with one reader (its output outlived the first flush) and no keeper.
    assert _threads(pid) == idle + 1
    go.touch()
    wait_until(lambda: _stage(api, flight["id"]) == "landed", timeout=60, what="the flight to land")
    wait_until(lambda: _threads(pid) == idle, timeout=30,
               what=f"the runner back to {idle} threads (it has {_threads(pid)})")
