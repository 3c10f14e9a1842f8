"""The pool and strategy commands against a real control plane (the CLI runs in-process)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from support import cli

GOOD = """\
environment: ui
inventory: {name: ui-pool, size: 2, warm: 1}
image: {ref: ui-image}
build: {context: ctx}
"""


def test_a_strategy_file_error_names_file_line_and_key_before_anything_is_sent(tmp_path):
    nowhere = SimpleNamespace(env={}, config_dir=tmp_path / "config", url="http://127.0.0.1:9")
    path = tmp_path / "ui.yaml"
    path.write_text(GOOD + "bounds:\n  pool-max: 5\n")
    code, out, err = cli(nowhere, "strategy", "apply", "ui", str(path))
    assert code == 2 and out == ""
    assert err == f"{path}:6: bounds.pool-max: must not exceed inventory.size (2) (got 5)\n"


def test_apply_build_and_look_at_a_pool_from_the_command_line(fleet, tmp_path, monkeypatch):
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "hello.txt").write_text("hi\n")
    path = tmp_path / "ui.yaml"
    path.write_text(GOOD)
    code, out, err = cli(fleet, "strategy", "apply", "ui", str(path))
    assert code == 0, err
    assert "first apply of pool ui-pool in environment ui (opens a gate)" in out
    gate = out.split("waits for gate ")[1].split()[0]
    code, out, _ = cli(fleet, "pools")
    assert f"needs attention: its strategy is not in force yet (gate {gate} is open)" in out
    assert cli(fleet, "gate", "clear", gate)[0] == 0

    monkeypatch.setenv("GG_IMAGES_DIR", str(tmp_path / "images"))
    code, out, err = cli(fleet, "strategy", "build", "ui", "--base", str(tmp_path))
    assert code == 0, err
    digest = out.split("pinned ")[1].split(";")[0]
    assert digest.startswith("sha256:") and (tmp_path / "images" / f"{digest[7:]}.tar").exists()
    code, out, _ = cli(fleet, "strategy", "build", "ui", "--base", str(tmp_path))
    assert f"{digest} was pinned already" in out

    row = json.loads(cli(fleet, "strategies", "--json")[1])[0]
    assert (row["name"], row["pool"], row["digest"], row["in_force"]) == ("ui", "ui-pool",
                                                                          digest, True)
    pools = json.loads(cli(fleet, "pools", "--json")[1])
    assert [p["name"] for p in pools] == ["ui-pool"]
    for key in ("name", "environment", "members", "last_attested_at", "needs_attention"):
        assert key in pools[0]
    assert pools[0]["needs_attention"] and pools[0]["last_attested_at"] is None
    code, out, _ = cli(fleet, "pools")
    assert "pool ui-pool: environment ui, process driver" in out
    assert "needs attention: never attested" in out
    code, _, err = cli(fleet, "pool", "allow", "ui-pool", "nobody")
    assert code == 5 and err == "no runner nobody\n"


def test_a_build_context_outside_the_airspace_is_refused_before_anything_is_sent(tmp_path):
    nowhere = SimpleNamespace(env={}, config_dir=tmp_path / "config", url="http://127.0.0.1:9")
    (tmp_path / "airspace" / "strategies").mkdir(parents=True)
    path = tmp_path / "airspace" / "strategies" / "ui.yaml"
    for context in ("../..", str(tmp_path / "config")):
        path.write_text(GOOD.replace("ctx", context))
        code, out, err = cli(nowhere, "strategy", "apply", "ui", str(path))
        assert code == 2 and out == ""
        assert err.startswith(f"{path}:4: build.context: must stay inside the airspace directory")
        assert err.count("\n") == 1


def test_build_refuses_a_posted_context_that_leads_out_of_its_base(fleet, tmp_path, monkeypatch):
    """A strategy posted over the API has no file to check against: build checks the context
    against --base before it packs anything into an image."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "key.pem").write_text("private\n")
    base = tmp_path / "airspace"
    base.mkdir()
    (base / "ctx").symlink_to(secrets)
    (base / "loop").symlink_to(base / "loop")
    for context in (str(secrets), "ctx", "loop"):
        mapping = {"environment": "ui", "inventory": {"name": "ui-pool", "size": 1},
                   "image": {"ref": "ui-image"}, "build": {"context": context}}
        applied = fleet.api().apply_strategy("ui", mapping)
        if applied.get("gate"):
            fleet.api().clear_gate(applied["gate"]["id"])
        monkeypatch.setenv("GG_IMAGES_DIR", str(tmp_path / "images"))
        code, out, err = cli(fleet, "strategy", "build", "ui", "--base", str(base))
        assert (code, out) == (2, "")
        assert err == (f"the build context {base / context} does not stay inside {base}: a "
                       "strategy builds only from inside its airspace directory (--base DIR)\n")
        assert not (tmp_path / "images").exists()


def test_build_resolves_the_context_against_the_strategy_file_not_the_working_dir(
        fleet, tmp_path, monkeypatch):
    airspace = tmp_path / "airspace"
    (airspace / "strategies").mkdir(parents=True)
    (airspace / "ctx").mkdir()
    (airspace / "ctx" / "hello.txt").write_text("hi\n")
    path = airspace / "strategies" / "ui.yaml"
    path.write_text(GOOD)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("GG_IMAGES_DIR", str(tmp_path / "images"))
    code, out, err = cli(fleet, "strategy", "apply", "ui", str(path), "--json")
    assert code == 0, err
    gate = json.loads(out).get("gate")
    if gate:
        fleet.api().clear_gate(gate["id"])
    code, out, err = cli(fleet, "strategy", "build", "ui", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["digest"].startswith("sha256:")
