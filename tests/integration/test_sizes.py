"""Placement by size for real: a real control plane, a real runner reporting a size smaller
than its host (``gg runner up --cpus 2``), the real CLI. A flight of ``--cpus 2`` fills it; a
second of ``--cpus 1`` waits with the sentence though a worker slot is free, and flies once
the first lands.
"""

from __future__ import annotations

import json
import os

import pytest

from gg.runner import cgroups

from support import wait_until

USABLE = cgroups.limits_usable() if os.geteuid() == 0 else {}
pytestmark = pytest.mark.skipif(
    "cpu" not in USABLE, reason="this host gives no cgroup controller cpu to a flight (run as "
                                "root on a host with it, v1 or v2): a --cpus flight fails there")


def _fly(fleet, *args: str) -> str:
    opened = fleet.gg("fly", "--json", *args)
    assert opened.returncode == 0, opened.stderr
    return json.loads(opened.stdout)["id"]


def test_a_flight_waits_for_cores_while_the_runner_flies_its_size_then_flies(fleet, tmp_path):
    fleet.runner("r1", workers=2, extra=["--cpus", "2"])
    fleet.wait_online("r1")
    api = fleet.api()
    assert wait_until(lambda: fleet.runner_row("r1") is not None
                      and api.runner("r1")["inventory"].get("size") == {"cpus": 2.0},
                      what="r1 to report its size")
    gate = tmp_path / "go"
    first = _fly(fleet, "--cpus", "2", "--", "sh", "-c",
                 f"while [ ! -e {gate} ]; do sleep 0.05; done")
    wait_until(lambda: api.flight(first)["stage"] == "flying", timeout=30,
               what="the first flight to fly")

    second = _fly(fleet, "--cpus", "1", "--", "true")
    sentence = "waiting: no runner has 1 core free (most: 0 on r1)"
    shown = wait_until(lambda: (lambda f: f if f["waiting"] == sentence else None)(
        api.flight(second)), timeout=30, what="the size sentence")
    assert shown["stage"] == "ready"
    assert "the runner's owner can finish or cancel what r1 flies" in shown["remedy"]
    plan = fleet.gg("plan", second)
    assert plan.returncode == 0, plan.stderr
    assert "runner r1 has 1 core free" in plan.stdout
    assert "0 of 2 cores free" in plan.stdout
    assert api.flight(second)["stage"] == "ready"  # a worker slot is free: only its size waits

    gate.write_text("")
    landed = wait_until(lambda: (lambda f: f if f["stage"] == "landed" else None)(
        api.flight(second)), timeout=60, what="the second flight to fly and land")
    assert api.flight(first)["stage"] == "landed"
    assert landed["waiting"] is None
