"""Taking things down from the command line against a real control plane (issue 16, point 4):
each delete answers one sentence, and a refusal names what still uses the thing."""

from __future__ import annotations

from fleet_support import mint, profile_yaml, write_profile
from support import cli, lay_out

STRATEGY = "environment: ui\ninventory: {name: ui-pool, size: 2, warm: 1}\nimage: {ref: ui}\n"


def test_profiles_environments_strategies_and_pools_can_be_taken_down(fleet, tmp_path):
    airspace = lay_out(tmp_path / "airspace", {"strategies/ui.yaml": STRATEGY})
    write_profile(airspace, "ui", profile_yaml("ui"))
    applied = cli(fleet, "fleet", "apply", "ui", "--airspace", str(airspace))
    assert applied[0] == 0, applied
    token = mint(fleet, "ui")
    fingerprint = next(r["fingerprint"] for r in fleet.api().enrol_tokens())
    code, out, err = cli(fleet, "fleet", "delete", "ui")
    assert code == 6 and out == ""
    assert err == (f"fleet profile ui is in use by enrolment token {fingerprint} "
                   "(gg fleet revoke); take those down first\n")
    assert token.startswith("gge_")
    assert cli(fleet, "fleet", "revoke", fingerprint)[0] == 0
    assert cli(fleet, "fleet", "delete", "ui") == (0, "profile ui is deleted\n", "")
    assert cli(fleet, "fleet", "delete", "ui")[0] == 5

    fleet.chart("ui")
    assert cli(fleet, "strategy", "apply", "ui", str(airspace / "strategies/ui.yaml"))[0] == 0
    assert cli(fleet, "pool", "delete", "ui-pool") == (0, "pool ui-pool is deleted\n", "")
    assert cli(fleet, "strategy", "show", "ui")[0] == 5
    assert cli(fleet, "strategy", "apply", "ui", str(airspace / "strategies/ui.yaml"))[0] == 0
    assert cli(fleet, "strategy", "delete", "ui") == (0, "strategy ui is deleted\n", "")

    flight = fleet.api().open_flight({"command": ["true"], "environment": "ui"})
    code, _, err = cli(fleet, "environment", "remove", "ui")
    assert code == 6 and f"used by flight {flight['id']}, which has not ended" in err
    assert cli(fleet, "cancel", flight["id"])[0] == 0
    assert cli(fleet, "environment", "remove", "ui") == (0, "environment ui is deleted\n", "")
