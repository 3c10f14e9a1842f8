"""Dry runs (issue 16, point 5): ``gg fleet apply --dry-run``, ``gg strategy apply --dry-run``
and ``gg airspace apply --dry-run`` say what would apply at once and what would open a gate
(and whose), and the store is byte for byte what it was; and ``gg airspace apply`` names the
gate when the missing step is a gate, not a runner."""

from __future__ import annotations

import json
import sqlite3

from fleet_support import apply_and_clear, profile_yaml, write_profile
from support import lay_out


def dump(fleet) -> list[str]:
    """Every row of the control plane's store, as SQL text (read beside the running server)."""
    conn = sqlite3.connect(fleet.server.data_dir / "gg.sqlite3")
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


STRATEGY = "environment: ui\ninventory: {name: ui-pool, size: 3, warm: 1}\nimage: {ref: ui}\n"


def test_fleet_apply_dry_run_says_what_applies_now_and_what_opens_whose_gate(fleet, tmp_path):
    airspace = tmp_path / "airspace"
    apply_and_clear(fleet, airspace, "ui", profile_yaml("ui", hosts=["github.com"]))
    # one narrowing (a host removed) and one widening (workers raised)
    write_profile(airspace, "ui", profile_yaml("ui").replace("workers: 1", "workers: 4"))
    before = dump(fleet)
    done = fleet.gg("fleet", "apply", "ui", "--airspace", str(airspace), "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "dry run: profile ui would become version 2; nothing was changed"
    assert "  would apply at once:" in lines and any("github.com" in line for line in lines)
    assert "  would open a gate (an admin clears it) for:" in lines
    assert dump(fleet) == before
    shown = json.loads(fleet.gg("fleet", "apply", "ui", "--airspace", str(airspace), "--dry-run",
                                "--json").stdout)
    assert shown["dry_run"] is True and shown["gate"] is not None
    assert dump(fleet) == before
    assert fleet.api().gates() == []


def test_strategy_and_root_dry_runs_change_nothing(fleet, tmp_path):
    path = lay_out(tmp_path / "airspace", {"strategies/ui.yaml": STRATEGY,
                                           "root.yaml": "environments: [ui]\n"})
    before = dump(fleet)
    done = fleet.gg("strategy", "apply", "ui", str(path / "strategies/ui.yaml"), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("dry run: strategy ui; nothing was changed\n")
    assert "would open a gate" in done.stdout and "cleared by an admin" in done.stdout
    assert dump(fleet) == before and fleet.api().strategies() == []

    applied = fleet.api().apply_strategy("ui", {"environment": "ui", "image": {"ref": "ui"},
                                                "inventory": {"name": "ui-pool", "size": 3,
                                                              "warm": 1}})
    fleet.api().clear_gate(applied["gate"]["id"])
    before = dump(fleet)
    root = fleet.gg("airspace", "apply", "--airspace", str(path), "--dry-run")
    assert root.returncode == 0, root.stderr
    assert root.stdout.startswith("dry run: the root envelope would apply at once (it opens no "
                                  "gate): ui; nothing was changed\n")
    assert dump(fleet) == before
    assert fleet.gg("airspace", "show", "--json").stdout.count('"ui"') == 0


def test_airspace_apply_names_the_gate_when_the_missing_step_is_a_gate(fleet, tmp_path):
    airspace = lay_out(tmp_path / "airspace", {"root.yaml": "environments: [ui]\n"})
    write_profile(airspace, "ui", profile_yaml("ui"))
    applied = json.loads(fleet.gg("fleet", "apply", "ui", "--airspace", str(airspace),
                                  "--json").stdout)
    gate = applied["gate"]["id"]
    done = fleet.gg("airspace", "apply", "--airspace", str(airspace))
    assert done.returncode == 6
    assert "no live runner advertises yet: environment ui is served by fleet profile ui, " \
           f"which waits behind gate {gate} (an admin clears it: gg gate clear {gate})" \
           in done.stderr
    assert "gg runner up" not in done.stderr
