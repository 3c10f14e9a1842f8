"""A whole airspace directory: every error in every file, collected in one pass."""

from __future__ import annotations

import pytest

from gg.airspace import AirspaceError, check_airspace, load_airspace

from support import lay_out

PROFILE = "purpose: p\nroles: [runner]\nenvironment: {env}\n"
STRATEGY = "environment: {env}\ninventory: {{name: {pool}, size: 2}}\nimage: {{ref: r}}\n"


def test_a_good_airspace_loads_everything(tmp_path):
    base = lay_out(tmp_path / "airspace", {
        "root.yaml": "environments: [ui, api]\n",
        "fleet/ui.yaml": PROFILE.format(env="ui"),
        "fleet/api.yaml": PROFILE.format(env="api"),
        "fleet/README.md": "not a profile",
        "strategies/ui.yaml": STRATEGY.format(env="ui", pool="ui-pool"),
    })
    assert check_airspace(base) == []
    airspace = load_airspace(base)
    assert airspace.root.environments == ("ui", "api")
    assert sorted(airspace.profiles) == ["api", "ui"]
    assert airspace.strategies["ui"].inventory.name == "ui-pool"


def test_every_error_in_every_file_is_collected_in_order(tmp_path):
    base = lay_out(tmp_path / "airspace", {
        "root.yaml": "environments: [ui]\n",
        "fleet/api.yaml": PROFILE.format(env="api"),                       # not in root
        "fleet/ui.yaml": "purpose: p\nroles: [runner]\nenvironment: ui\n"
                         "sweeps: maybe\npolicy: {isolation: sandbx}\n",  # two errors
        "fleet/broken.yaml": "purpose: [\n",                               # malformed
        "fleet/old.yml": PROFILE.format(env="ui"),                         # wrong suffix
        "strategies/a.yaml": STRATEGY.format(env="ui", pool="shared"),
        "strategies/b.yaml": STRATEGY.format(env="ui", pool="shared"),     # pool taken
    })
    found = [(e.file.removeprefix(str(base) + "/"), e.line, e.key) for e in check_airspace(base)]
    assert found == [
        ("fleet/api.yaml", 3, "environment"),
        ("fleet/broken.yaml", 2, None),
        ("fleet/old.yml", None, None),
        ("fleet/ui.yaml", 4, "sweeps"),
        ("fleet/ui.yaml", 5, "policy.isolation"),
        ("strategies/b.yaml", 2, "inventory.name"),
    ]
    with pytest.raises(AirspaceError) as caught:
        load_airspace(base)
    assert caught.value.file.endswith("fleet/api.yaml")
    assert "api is not listed in root.yaml's environments (ui)" in str(caught.value)


def test_without_a_root_environments_are_not_cross_checked(tmp_path):
    base = lay_out(tmp_path / "airspace", {"fleet/ui.yaml": PROFILE.format(env="anything")})
    assert check_airspace(base) == []


def test_a_directory_that_is_not_an_airspace_is_one_clear_error(tmp_path):
    assert [e.problem for e in check_airspace(tmp_path / "missing")] == ["is not a directory"]
    (tmp_path / "empty").mkdir()
    assert "is it an airspace directory" in check_airspace(tmp_path / "empty")[0].problem


def test_a_build_context_through_a_symbolic_link_out_of_the_airspace_is_reported(tmp_path):
    base = tmp_path / "airspace"
    (base / "strategies").mkdir(parents=True)
    (base / "images").mkdir()
    (tmp_path / "keys").mkdir()
    (base / "images" / "ui").symlink_to(tmp_path / "keys")
    (base / "strategies" / "ui.yaml").write_text(
        "environment: ui\ninventory: {name: ui-pool, size: 1}\nimage: {ref: ui}\n"
        "build: {context: images/ui}\n")
    errors = check_airspace(base)
    assert [(e.file, e.line, e.key) for e in errors] == [
        (str(base / "strategies" / "ui.yaml"), 4, "build.context")]
    assert f"a symbolic link leads it to {tmp_path / 'keys'}" in errors[0].problem
